"""Hardware: a device and the hierarchy of machine levels that joins devices (Multi-BSP)."""
