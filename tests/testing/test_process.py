"""Ports for the servers tests start (brokers, judges, Phoenix), several test workers at once."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tracescore.testing import closed_port, free_port


def test_free_ports_are_below_the_range_the_kernel_gives_outgoing_connections() -> None:
    """Outgoing connections (many, with parallel workers) take ports from the ephemeral range: a port chosen
    there could be taken between the choice and a slow server's bind."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = {free_port() for _ in range(50)}
    assert all(1024 < port < low for port in ports), sorted(ports)
    assert len(ports) > 40, "chosen at random, so parallel workers rarely pick the same one"
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # free when returned


def test_a_closed_port_refuses_connections_and_no_server_can_take_it_while_held() -> None:
    """For a test of a server that is down: a port found free and let go (bind to 0, close) could be bound
    by another worker's server before the test connects, and the 'down' server would answer."""
    with closed_port() as port:
        with socket.socket() as server, pytest.raises(OSError):
            server.bind(("127.0.0.1", port))  # another worker's server cannot take it
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5)
