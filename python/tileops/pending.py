"""Lists the kernels built but not yet verified on their device, one a line: those of tileops.pending()
(op class, target), then those a developer setting turns on (tileops.pending_tuning(): op class,
target, TILEOPS_TUNE setting).

    python -m tileops.pending      # exit status 0; prints nothing when every kernel is verified
"""
import tileops

if __name__ == "__main__":
    for op_class, target in tileops.pending():
        print(f"{op_class}\t{target}")
    for op_class, setting in tileops.pending_tuning():
        print(f"{op_class}\tnvrtc\t{setting}")
