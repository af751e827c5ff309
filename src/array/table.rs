//! Tables: bcolz ctables and python-blosc2 CTables as named columns over [`NdArray`]s.
