"""The Ray actors that own a model on a device (policy and critic ranks), their groups as the driver calls them, the
refit from policy ranks to engines, the driver's traffic, and the memory plan of a placement."""
