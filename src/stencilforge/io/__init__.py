"""Outputs of a run: snapshot series (HDF5 + XDMF, NetCDF, npz) with the receivers' traces, checkpoints, pictures.

h5py, h5netcdf and matplotlib are imported by the modules that need them, so the
solver and the CLI start without paying for them.
"""
