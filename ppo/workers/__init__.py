"""Ray actors that own a model or an engine on a device, and the local Ray runtime."""
