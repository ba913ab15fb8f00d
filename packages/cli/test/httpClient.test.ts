import { HttpBody, HttpClient, HttpClientRequest } from "@effect/platform"
import { Chunk, Effect, Either, Fiber, Stream } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import * as Fake from "../../models/test/support/FakeServer.js"
import * as NodeHttp from "../src/internal/httpClient.js"

// The node:http client muse talks to model servers with, against a real local server: bodies arrive
// whole with their length, connections are kept for the next request once a response is read, and a
// request or stream given up on is closed.

const servers: Array<Fake.Listening> = []
afterAll(() => Promise.all(servers.map((s) => s.close())))

/** A server that records the client port of every request and answers with `handler`. */
const serve = async (handler: Fake.Handler) => {
  const ports: Array<number | undefined> = []
  const closed: Array<number | undefined> = []
  const server = await Fake.listen({
    fallback: (req, res, recorded) => {
      const port = req.socket.remotePort
      ports.push(port)
      req.socket.once("close", () => closed.push(port))
      return handler(req, res, recorded)
    }
  })
  servers.push(server)
  return { server, ports, closed }
}

const run = <A, E>(effect: Effect.Effect<A, E, HttpClient.HttpClient>) =>
  Effect.runPromise(Effect.provide(effect, NodeHttp.layer))

const post = (url: string, text: string) =>
  HttpClientRequest.post(url, { body: HttpBody.raw(text, { contentType: "application/json" }) })

const events = [{ data: { n: 1 } }, { data: { n: 2 } }, { data: "[DONE]" }]

describe("node:http client", () => {
  it("sends a text body in full with its byte length and content type", async () => {
    const { server } = await serve(Fake.json(200, { ok: true }))
    const text = JSON.stringify({ say: "héllo ✓ ".repeat(5000) })
    const json = await run(Effect.flatMap(HttpClient.execute(post(`${server.url}/v1/x`, text)), (r) => r.json))
    expect(json).toEqual({ ok: true })
    const got = server.requests[0]!
    expect(got.raw).toBe(text)
    expect(got.headers["content-length"]).toBe(String(Buffer.byteLength(text)))
    expect(got.headers["content-type"]).toBe("application/json")
    expect(got.method).toBe("POST")
    expect(got.headers["user-agent"]).toMatch(/^muse\/\d+\.\d+\.\d+/)
  })

  it("sends bytes, a Blob and a stream of chunks as they are", async () => {
    const { server } = await serve(Fake.json(200, {}))
    const bytes = new TextEncoder().encode("bytes ✓")
    const send = (body: HttpBody.HttpBody) =>
      Effect.scoped(
        Effect.flatMap(HttpClient.execute(HttpClientRequest.post(`${server.url}/b`, { body })), (r) => r.text)
      )
    await run(
      Effect.all([
        send(HttpBody.uint8Array(bytes)),
        send(HttpBody.raw(new Blob(["a blob ", "✓"]))),
        send(HttpBody.stream(Stream.make(...["a ", "stream ", "✓"].map((t) => new TextEncoder().encode(t)))))
      ])
    )
    expect(server.requests.map((r) => r.raw)).toEqual(["bytes ✓", "a blob ✓", "a stream ✓"])
    expect(server.requests[0]!.headers["content-length"]).toBe(String(bytes.byteLength))
    expect(server.requests[1]!.headers["content-length"]).toBe(String(Buffer.byteLength("a blob ✓")))
    expect(server.requests[2]!.headers["transfer-encoding"]).toBe("chunked")
  })

  it("keeps the connection for the next request once a stream is read, even when the reader stops early", async () => {
    const { server, ports, closed } = await serve(Fake.sse(events, { gapMs: 0 }))
    const read = (take: number) =>
      Effect.scoped(
        Effect.flatMap(HttpClient.execute(post(`${server.url}/v1/s`, "{}")), (r) =>
          r.stream.pipe(Stream.decodeText(), Stream.take(take), Stream.runCollect)
        )
      )
    // (a connection goes back to the pool a tick after its response ends)
    const texts = await run(Effect.all([read(10), read(1), Effect.zipRight(Effect.sleep("20 millis"), read(10))]))
    expect(Chunk.toReadonlyArray(texts[0]).join("")).toBe(events.map(Fake.frame).join(""))
    expect(Chunk.toReadonlyArray(texts[1]).join("").startsWith("data: ")).toBe(true)
    expect(ports).toHaveLength(3)
    expect(new Set(ports).size).toBe(1)
    expect(closed).toEqual([])
    expect(server.requests.every((r) => !r.aborted)).toBe(true)
  })

  it("closes a stream given up on while the server is still sending, and the next request gets a new connection", async () => {
    const { server, ports, closed } = await serve(Fake.sse(events, { gapMs: 200 }))
    const first = await run(
      Effect.scoped(
        Effect.flatMap(HttpClient.execute(post(`${server.url}/v1/s`, "{}")), (r) =>
          r.stream.pipe(Stream.decodeText(), Stream.take(1), Stream.runCollect)
        )
      )
    )
    expect(Chunk.toReadonlyArray(first).join("")).toBe(Fake.frame(events[0]!))
    await new Promise((r) => setTimeout(r, 100))
    expect(closed).toEqual([ports[0]])
    await run(Effect.scoped(Effect.flatMap(HttpClient.execute(post(`${server.url}/v1/s`, "{}")), (r) => r.text)))
    expect(ports).toHaveLength(2)
    expect(ports[1]).not.toBe(ports[0])
  })

  it("aborts a request in flight when the caller is interrupted", async () => {
    const { server, closed, ports } = await serve(Fake.hang)
    await run(
      Effect.gen(function* () {
        const fiber = yield* Effect.fork(HttpClient.execute(post(`${server.url}/v1/h`, "{}")))
        while (server.requests.length === 0) yield* Effect.sleep("5 millis")
        yield* Fiber.interrupt(fiber)
      })
    )
    await new Promise((r) => setTimeout(r, 100))
    expect(closed).toEqual(ports)
    expect(server.requests[0]!.aborted).toBe(true)
  })

  it("fails a refused connection as a transport error carrying the system's code", async () => {
    const { server } = await serve(Fake.json(200, {}))
    const url = server.url
    await server.close()
    const result = await run(Effect.either(HttpClient.execute(post(`${url}/v1/x`, "{}"))))
    expect(Either.isLeft(result)).toBe(true)
    const error = Either.getLeft(result).pipe((o) => (o._tag === "Some" ? o.value : undefined))
    expect(error?._tag).toBe("RequestError")
    expect((error as { reason?: string }).reason).toBe("Transport")
    expect((error as { cause?: { code?: string } }).cause?.code).toBe("ECONNREFUSED")
  })

  it("passes an error status and its body through", async () => {
    const { server } = await serve(Fake.json(429, { error: { message: "slow down" } }, { "retry-after": "3" }))
    const r = await run(
      Effect.flatMap(HttpClient.execute(post(`${server.url}/v1/x`, "{}")), (res) =>
        Effect.map(res.json, (body) => ({ status: res.status, retry: res.headers["retry-after"], body }))
      )
    )
    expect(r).toEqual({ status: 429, retry: "3", body: { error: { message: "slow down" } } })
  })
})
