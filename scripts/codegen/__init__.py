"""libtileops code generator: manifests/*.yaml -> operators (parse -> model -> emit)."""
