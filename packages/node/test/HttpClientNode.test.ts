import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as Https from "node:https"
import * as os from "node:os"
import * as path from "node:path"
import { HttpBody, HttpClient, HttpClientRequest } from "@effect/platform"
import { Chunk, Effect, Either, Fiber, type Layer, Stream } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import * as Fake from "../../models/test/support/FakeServer.js"
import * as HttpClientNode from "../src/HttpClientNode.js"

// The node:http client for model servers, against a real local server: bodies arrive whole with
// their length, connections are kept for the next request once a response is read, and a request
// or stream given up on is closed.

const servers: Array<Fake.Listening> = []
afterAll(() => Promise.all(servers.map((s) => s.close())))

/** A server that records the client port of every request and answers with `handler`. */
const serve = async (handler: Fake.Handler, tls?: Fake.ListenOptions["tls"]) => {
  const ports: Array<number | undefined> = []
  const closed: Array<number | undefined> = []
  const watched = new WeakSet<object>()
  const server = await Fake.listen({
    fallback: (req, res, recorded) => {
      const port = req.socket.remotePort
      ports.push(port)
      if (!watched.has(req.socket)) {
        watched.add(req.socket)
        req.socket.once("close", () => closed.push(port))
      }
      return handler(req, res, recorded)
    },
    tls
  })
  servers.push(server)
  return { server, ports, closed }
}

const run = <A, E>(
  effect: Effect.Effect<A, E, HttpClient.HttpClient>,
  layer: Layer.Layer<HttpClient.HttpClient> = HttpClientNode.layer
) => Effect.runPromise(Effect.provide(effect, layer))

const post = (url: string, text: string) =>
  HttpClientRequest.post(url, { body: HttpBody.raw(text, { contentType: "application/json" }) })

const events = [{ data: { n: 1 } }, { data: { n: 2 } }, { data: "[DONE]" }]

describe("HttpClientNode", () => {
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
    const { version } = JSON.parse(fs.readFileSync(new URL("../package.json", import.meta.url), "utf8"))
    expect(got.headers["user-agent"]).toBe(`musekit/${version}`)
    expect(got.headers["accept-encoding"]).toBe("identity") // nothing is decompressed: none asked for
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

  it("follows redirects: 307/308 repeat the request, 301-303 turn it into a GET; credentials stay with their origin", async () => {
    const target = await serve(Fake.json(200, { ok: true }))
    const { server } = await serve((req, res) => {
      const to = (status: number, location: string) => {
        res.writeHead(status, { location })
        res.end()
      }
      if (req.url === "/same") return to(307, "/v1/final")
      if (req.url === "/perm") return to(308, `${target.server.url}/v1/elsewhere`)
      if (req.url === "/see") return to(303, "/v1/final")
      if (req.url === "/moved") return to(301, "/v1/final")
      if (req.url === "/loop") return to(307, "/loop")
      if (req.url === "/ftp") return to(307, "ftp://example.com/x")
      return Fake.json(200, { here: req.url })(req, res, undefined as never)
    })
    const call = (p: string) =>
      run(
        Effect.flatMap(
          HttpClient.execute(
            post(`${server.url}${p}`, '{"q":1}').pipe(
              HttpClientRequest.setHeaders({ authorization: "Bearer s3cret", "x-api-key": "k3y", "x-keep": "1" })
            )
          ),
          (r) => Effect.map(r.text, (text) => ({ status: r.status, text }))
        )
      )
    expect(await call("/same")).toEqual({ status: 200, text: JSON.stringify({ here: "/v1/final" }) })
    const again = server.requests.find((r) => r.url === "/v1/final")!
    expect(again.method).toBe("POST")
    expect(again.raw).toBe('{"q":1}')
    expect(again.headers.authorization).toBe("Bearer s3cret") // same origin

    expect((await call("/perm")).status).toBe(200)
    const moved = target.server.requests[0]!
    expect(moved.method).toBe("POST")
    expect(moved.raw).toBe('{"q":1}')
    expect(moved.headers.authorization).toBeUndefined() // another origin: no credentials
    expect(moved.headers["x-api-key"]).toBeUndefined()
    expect(moved.headers["x-keep"]).toBeUndefined() // nor any header not known to carry none
    expect(moved.headers["content-type"]).toBe("application/json")
    expect(moved.headers["user-agent"]).toMatch(/^musekit/)

    server.requests.length = 0
    expect((await call("/see")).status).toBe(200)
    const seen = server.requests.find((r) => r.url === "/v1/final")!
    expect(seen.method).toBe("GET")
    expect(seen.raw).toBe("")

    // a 301 turns only a POST into a GET; other methods go on as they are
    server.requests.length = 0
    const del = await run(
      Effect.flatMap(HttpClient.execute(HttpClientRequest.del(`${server.url}/moved`)), (r) => Effect.succeed(r.status))
    )
    expect(del).toBe(200)
    expect(server.requests.map((r) => [r.method, r.url])).toEqual([
      ["DELETE", "/moved"],
      ["DELETE", "/v1/final"]
    ])
    // a streamed body is not sent twice: the 3xx comes back
    const streamed = await run(
      Effect.flatMap(
        HttpClient.execute(
          HttpClientRequest.post(`${server.url}/same`, {
            body: HttpBody.stream(Stream.make(new TextEncoder().encode("{}")), "application/json")
          })
        ),
        (r) => Effect.succeed(r.status)
      )
    )
    expect(streamed).toBe(307)

    server.requests.length = 0
    expect((await call("/loop")).status).toBe(307) // the last 3xx as it is
    expect(server.requests).toHaveLength(1 + HttpClientNode.MAX_REDIRECTS)
    expect((await call("/ftp")).status).toBe(307)
  })

  it("a body read after its stream broke off fails at once instead of waiting", async () => {
    const { server } = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.write(Fake.frame(events[0]!))
      setTimeout(() => res.socket?.destroy(), 30)
    })
    const started = Date.now()
    const result = await run(
      Effect.scoped(
        Effect.flatMap(HttpClient.execute(post(`${server.url}/v1/cut`, "{}")), (r) =>
          r.stream.pipe(
            Stream.runDrain,
            Effect.either,
            Effect.flatMap(() => Effect.either(r.text))
          )
        )
      ).pipe(Effect.timeout("5 seconds"), Effect.either)
    )
    expect(Date.now() - started).toBeLessThan(3000)
    expect(Either.isRight(result) && Either.isLeft(result.right)).toBe(true)
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

  it("sends the user-agent it is given, none when told so, and a request's own always", async () => {
    const { server } = await serve(Fake.json(200, {}))
    const call = (layer: Layer.Layer<HttpClient.HttpClient>, request = post(`${server.url}/u`, "{}")) =>
      run(
        Effect.flatMap(HttpClient.execute(request), (r) => r.text),
        layer
      )
    await call(HttpClientNode.layerWith({ userAgent: "my-agent/1.2" }))
    await call(HttpClientNode.layerWith({ userAgent: false }))
    await call(
      HttpClientNode.layerWith({ userAgent: "my-agent/1.2" }),
      post(`${server.url}/u`, "{}").pipe(HttpClientRequest.setHeader("user-agent", "per-request/3"))
    )
    expect(server.requests.map((r) => r.headers["user-agent"])).toEqual(["my-agent/1.2", undefined, "per-request/3"])
  })

  it("reads a body in full and keeps the connection; one given up on while arriving is closed", async () => {
    const { server, ports, closed } = await serve(Fake.sse(events, { gapMs: 100 }))
    const text = await run(
      Effect.scoped(Effect.flatMap(HttpClient.execute(post(`${server.url}/v1/t`, "{}")), (r) => r.text))
    )
    expect(text).toBe(events.map(Fake.frame).join(""))
    await new Promise((r) => setTimeout(r, 20))
    expect(closed).toEqual([])
    // the second read gives up after 50 ms, while the server is still sending (no scope closes
    // the request here: giving up on the body is what closes it)
    const given = await run(
      Effect.flatMap(HttpClient.execute(post(`${server.url}/v1/t`, "{}")), (r) =>
        Effect.timeoutOption(r.text, "50 millis")
      )
    )
    expect(given._tag).toBe("None")
    await new Promise((r) => setTimeout(r, 100))
    expect(ports).toHaveLength(2)
    expect(ports[1]).toBe(ports[0])
    expect(closed).toEqual([ports[0]])
  })

  it("talks HTTPS, keeping one connection, with the certificate authority given in its agents", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "musekit-tls-"))
    try {
      execFileSync(
        "openssl",
        [
          ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"],
          ...["-keyout", path.join(dir, "key.pem"), "-out", path.join(dir, "cert.pem")],
          ...["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
        ],
        { stdio: "ignore" }
      )
    } catch {
      throw new Error("this test needs openssl on PATH to make a self-signed certificate")
    }
    const key = fs.readFileSync(path.join(dir, "key.pem"), "utf8")
    const cert = fs.readFileSync(path.join(dir, "cert.pem"), "utf8")
    fs.rmSync(dir, { recursive: true, force: true })
    const { server, ports } = await serve(Fake.sse(events, { gapMs: 0 }), { key, cert })
    expect(server.url.startsWith("https://")).toBe(true)
    const text = '{"say":"' + "✓".repeat(40_000) + '"}'
    const read = Effect.scoped(
      Effect.flatMap(HttpClient.execute(post(`${server.url}/v1/s`, text)), (r) =>
        r.stream.pipe(Stream.decodeText(), Stream.mkString)
      )
    )
    const agent = new Https.Agent({ keepAlive: true, ca: cert })
    const trusted = HttpClientNode.layerWith({ agents: { https: agent } })
    const got = await run(Effect.all([read, Effect.zipRight(Effect.sleep("20 millis"), read)]), trusted)
    agent.destroy()
    expect(got).toEqual([events.map(Fake.frame).join(""), events.map(Fake.frame).join("")])
    expect(server.requests.map((r) => r.raw)).toEqual([text, text])
    expect(new Set(ports).size).toBe(1)
    // the process's own pool does not trust a self-signed certificate: a transport error
    const refused = await run(Effect.either(HttpClient.execute(post(`${server.url}/v1/s`, "{}"))))
    const error = Either.isLeft(refused) ? refused.left : undefined
    expect(error?._tag).toBe("RequestError")
    expect((error as { reason?: string }).reason).toBe("Transport")
    expect((error as { cause?: { code?: string } }).cause?.code).toMatch(/SELF_SIGNED|UNABLE_TO_VERIFY/)
    expect(server.requests).toHaveLength(2)
  })
})
