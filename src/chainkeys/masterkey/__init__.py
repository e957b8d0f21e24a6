"""The master key: opening the vault at start, rotation and retirement."""
