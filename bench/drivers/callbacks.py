"""Sends N `ping_back(cb, 4)` calls one at a time to a plugin, answering
each of its `callback.call` requests with an int, as the real host does.

Instruction counts a call as for sequential.py (callgrind, two N).

Usage: callbacks.py N PLUGIN [ARGS...]
"""
import json
import subprocess
import sys

n = int(sys.argv[1])
plugin = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, bufsize=0)


def send(line):
    plugin.stdin.write(line.encode() + b"\n")


send('{"jsonrpc":"2.0","id":0,"method":"scriptling.handshake","params":{"protocol":"1.0"}}')
plugin.stdout.readline()
for i in range(1, n + 1):
    send('{"jsonrpc":"2.0","id":%d,"method":"function.call","params":{"name":"ping_back","args":'
         '[{"type":"callback","callback":{"id":"cb-%d"}},{"type":"int","value":4}]}}' % (i, i))
    while True:
        message = json.loads(plugin.stdout.readline())
        if message.get("method") != "callback.call":
            assert message.get("id") == i, message
            break
        args = message["params"].get("args", [])
        value = args[0]["value"] if args else 0
        send('{"jsonrpc":"2.0","id":%s,"result":{"type":"int","value":%d}}' % (json.dumps(message["id"]), value))
send('{"jsonrpc":"2.0","id":%d,"method":"plugin.shutdown"}' % (n + 1))
plugin.stdout.readline()
plugin.stdin.close()
plugin.wait()
