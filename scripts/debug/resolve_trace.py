"""Annotate the lines scripts/debug/segv_trace.c printed ("pc|fp|bt ADDR OBJECT(+OFFSET) SYMBOL") with
addr2line's function and source line, for objects built with debug info (libtileops.so).

    python3 scripts/debug/resolve_trace.py < pytest.log        # prints the trace lines, resolved
"""
import re
import subprocess
import sys

LINE = re.compile(r"^(pc|fp|bt) (0x[0-9a-f]+) (\S+)\(\+(0x[0-9a-f]+)\) (\S+)")


def main() -> None:
    for line in sys.stdin:
        m = LINE.match(line)
        if m is None:
            if line.startswith("SEGV at"):
                sys.stdout.write(line)
            continue
        line = line.rstrip("\n")
        if "tileops" in m[3]:
            out = subprocess.run(["addr2line", "-f", "-C", "-i", "-e", m[3], m[4]], capture_output=True, text=True,
                                 timeout=30).stdout.split("\n")
            line += "  => " + " | ".join(x for x in out[:4] if x)
        print(line)


if __name__ == "__main__":
    main()
