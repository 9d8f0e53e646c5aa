"""Lists the kernels built but not yet verified on their device (tileops.pending()), one a line.

    python -m tileops.pending      # exit status 0; prints nothing when every kernel is verified
"""
import tileops

if __name__ == "__main__":
    for op_class, target in tileops.pending():
        print(f"{op_class}\t{target}")
