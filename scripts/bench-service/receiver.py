"""A destination for the delivery benchmarks: an asyncio HTTP/1.1 server on loopback that answers every request 200
(keep-alive), counting them. Runs until `stop` is set; its port is appended to `ready`."""
import asyncio


async def receiver(ready, stop, count=None):
    async def handle(reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                if count is not None:
                    count[0] += 1
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    ready.append(server.sockets[0].getsockname()[1])
    while not stop.is_set():
        await asyncio.sleep(0.05)
    server.close()
