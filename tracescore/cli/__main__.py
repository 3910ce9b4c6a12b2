"""`python -m tracescore.cli`: the `tracescore` command, where its script is not on PATH."""

from tracescore.cli import run

if __name__ == "__main__":
    run()
