"""Postbacks in, conversions recorded, postbacks out: parsing, the recorder, status maps, outbound
deliveries and refused-postback counters."""
