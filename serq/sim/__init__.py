"""The simulator: sessions as SimPy processes, pools with a prefix cache, stages."""
