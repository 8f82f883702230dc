"""Sends N `greet` calls one at a time to a plugin and reports calls/s.

For instruction counts a call (what ARCHITECTURE.md quotes), run the plugin
under callgrind through a wrapper script and take two N, so start-up cancels:

    printf '#!/bin/sh\\nexec valgrind --tool=callgrind --callgrind-out-file=/tmp/cg-$N.out PLUGIN\\n' > /tmp/w
    python3 bench/drivers/sequential.py N /tmp/w      # for N = 2000 and 7000
    # (totals of the 7000 run - totals of the 2000 run) / 5000

Usage: sequential.py N PLUGIN [ARGS...]
"""
import subprocess
import sys
import time

n = int(sys.argv[1])
plugin = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, bufsize=0)


def round_trip(line):
    plugin.stdin.write(line.encode() + b"\n")
    return plugin.stdout.readline()


round_trip('{"jsonrpc":"2.0","id":0,"method":"scriptling.handshake","params":{"protocol":"1.0"}}')
started = time.time()
for i in range(1, n + 1):
    answer = round_trip('{"jsonrpc":"2.0","id":%d,"method":"function.call","params":{"name":"greet",'
                        '"args":[{"type":"string","value":"Ada"}]}}' % i)
    assert b"Hello, Ada" in answer, answer
elapsed = time.time() - started
round_trip('{"jsonrpc":"2.0","id":%d,"method":"plugin.shutdown"}' % (n + 1))
plugin.stdin.close()
plugin.wait()
print("%.1f calls/s" % (n / elapsed), file=sys.stderr)
