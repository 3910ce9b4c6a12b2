"""Runnable examples of tracescore (see examples/rag_app)."""
