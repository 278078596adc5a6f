"""Hardware components: link/channel occupancy, HBM controllers, the fabric, flows."""
