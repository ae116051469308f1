"""One module per routine, each built on jaxmg._core."""
