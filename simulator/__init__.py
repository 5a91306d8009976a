"""A discrete-event simulator of the collection's schemes on clusters of
any size (`python -m simulator --help`, docs/simulator.md)."""
