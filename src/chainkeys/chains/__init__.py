"""Pure chain layer: keys, addresses, formats and networks. No I/O, no settings, no logging."""
