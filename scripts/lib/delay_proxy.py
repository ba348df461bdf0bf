#!/usr/bin/env python3
"""A TCP proxy that holds every byte for a fixed time in each direction, so that the
benchmarks can show what a long link costs (a round trip is twice the delay) where
`tc netem` is not available. Bandwidth is not limited; LINK_RATE does that.

usage: delay_proxy.py READY_FILE TARGET_HOST:PORT ONE_WAY_MS
Listens on 127.0.0.1, on a free port, and writes `127.0.0.1:PORT` to READY_FILE.
"""
import asyncio
import os
import sys

CHUNK = 64 * 1024
# At most this many chunks in flight per direction: a window of 16 MiB, which allows
# 16 MiB per delay (over 600 MB/s at 25 ms), while bounding memory.
WINDOW = 256


async def pump(reader, writer, delay):
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue(WINDOW)

    async def send():
        while True:
            due, data = await queue.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                if writer.can_write_eof():
                    writer.write_eof()
                return
            writer.write(data)
            await writer.drain()

    sender = asyncio.create_task(send())
    try:
        while True:
            data = await reader.read(CHUNK)
            await queue.put((loop.time() + delay, data))
            if not data:
                break
        await sender
    except (ConnectionError, OSError):
        sender.cancel()


async def handle(client_reader, client_writer, target, delay):
    host, port = target.rsplit(":", 1)
    try:
        server_reader, server_writer = await asyncio.open_connection(host, int(port))
    except OSError:
        client_writer.close()
        return
    try:
        await asyncio.gather(
            pump(client_reader, server_writer, delay),
            pump(server_reader, client_writer, delay),
        )
    finally:
        for w in (client_writer, server_writer):
            w.close()


async def main():
    ready_file, target, one_way_ms = sys.argv[1], sys.argv[2], float(sys.argv[3])
    delay = one_way_ms / 1000.0
    server = await asyncio.start_server(
        lambda r, w: handle(r, w, target, delay), "127.0.0.1", 0
    )
    port = server.sockets[0].getsockname()[1]
    tmp = ready_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"127.0.0.1:{port}\n")
    os.replace(tmp, ready_file)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
