"""Drives a plugin over stdio, one call at a time, as a host would:
`greet` N times, or `ping_back(cb, 4)` N times, answering each of the
plugin's `callback.call` requests with an int, as the real host does.

For instruction counts a call (what ARCHITECTURE.md quotes), run the plugin
under callgrind through a wrapper script, for two N, so start-up cancels:

    printf '#!/bin/sh\\nexec valgrind --tool=callgrind --callgrind-out-file=/tmp/cg-%s.out PLUGIN\\n' 2000 > /tmp/w
    python3 bench/drivers/drive.py greet 2000 /tmp/w   # then again with 7000
    # (the 7000 run's total - the 2000 run's total) / 5000

Usage: drive.py greet|callbacks N PLUGIN [ARGS...]
"""
import json
import subprocess
import sys
import time

loop, n = sys.argv[1], int(sys.argv[2])
plugin = subprocess.Popen(sys.argv[3:], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, bufsize=0)


def send(line):
    plugin.stdin.write(line.encode() + b"\n")


def call(i, name, args):
    """Sends call `i` and answers callbacks until its own answer comes."""
    send('{"jsonrpc":"2.0","id":%d,"method":"function.call","params":{"name":"%s","args":%s}}' % (i, name, args))
    while True:
        message = json.loads(plugin.stdout.readline())
        if message.get("method") != "callback.call":
            assert message.get("id") == i and "result" in message, message
            return message["result"]
        given = message["params"].get("args", [])
        value = given[0]["value"] if given else 0
        send('{"jsonrpc":"2.0","id":%s,"result":{"type":"int","value":%d}}' % (json.dumps(message["id"]), value))


send('{"jsonrpc":"2.0","id":0,"method":"scriptling.handshake","params":{"protocol":"1.0"}}')
plugin.stdout.readline()
started = time.time()
for i in range(1, n + 1):
    if loop == "greet":
        call(i, "greet", '[{"type":"string","value":"Ada"}]')
    else:
        call(i, "ping_back", '[{"type":"callback","callback":{"id":"cb-%d"}},{"type":"int","value":4}]' % i)
elapsed = time.time() - started
send('{"jsonrpc":"2.0","id":%d,"method":"plugin.shutdown"}' % (n + 1))
plugin.stdout.readline()
plugin.stdin.close()
plugin.wait()
print("%.1f calls/s" % (n / elapsed), file=sys.stderr)
