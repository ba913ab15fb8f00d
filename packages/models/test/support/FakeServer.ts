/**
 * A model provider's HTTP server on 127.0.0.1 for tests and benchmarks: real sockets, real HTTP,
 * answers queued per request (or computed by a fallback handler), every request recorded with its
 * raw body and the times it arrived and was answered.
 *
 * @example
 * ```ts
 * import * as Fake from "./FakeServer.js"
 *
 * const server = yield* Fake.make // scoped: closed with the scope
 * server.reply(Fake.json(200, { ok: true }), Fake.sse([{ data: { hello: 1 } }, { data: "[DONE]" }]))
 *
 * const plain = await Fake.listen({ fallback: (req, res, recorded) => res.end("{}") }) // no Effect
 * await plain.close()
 * ```
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import { createServer as createTlsServer } from "node:https"
import type { AddressInfo } from "node:net"
import { Effect, type Scope } from "effect"

/** A request as the fake server received it. */
export interface Recorded {
  readonly method: string
  readonly url: string
  readonly headers: IncomingMessage["headers"]
  readonly raw: string
  /** Size of the request body in bytes, as it came over the wire. */
  readonly bytes: number
  readonly body: any
  /** Wall-clock ms when the body was complete. */
  readonly at: number
  /** `performance.now()` of this process when the request line and headers arrived. */
  readonly receivedAt: number
  /** `performance.now()` when the response was handed to the socket in full (undefined until then). */
  finishedAt: number | undefined
  /** True when the client went away before the response was complete. */
  aborted: boolean
}

export type Handler = (req: IncomingMessage, res: ServerResponse, recorded: Recorded) => void | Promise<void>

export interface FakeServer {
  readonly url: string
  readonly requests: Array<Recorded>
  /** Queue handlers for the next requests, in order. */
  readonly reply: (...handlers: Array<Handler>) => void
}

export interface Listening extends FakeServer {
  readonly close: () => Promise<void>
}

export interface ListenOptions {
  /** Answers a request when no handler is queued (default: a 500 naming the problem). */
  readonly fallback?: Handler | undefined
  /** Keep only requests for which this is true in `requests` (default: all). */
  readonly record?: ((recorded: Recorded) => boolean) | undefined
  /** Serve HTTPS with this key and certificate (PEM); the url is then `https://127.0.0.1:<port>`. */
  readonly tls?: { readonly key: string; readonly cert: string } | undefined
}

const noHandler: Handler = (_req, res) => {
  res.writeHead(500, { "content-type": "application/json" })
  res.end(JSON.stringify({ error: { message: "fake server: no handler queued" } }))
}

/** Starts the server; plain Promises, for code that does not run in Effect (benchmarks). */
export const listen = (options: ListenOptions = {}): Promise<Listening> =>
  new Promise((resolve) => {
    const queue: Array<Handler> = []
    const requests: Array<Recorded> = []
    const onRequest = (req: IncomingMessage, res: ServerResponse) => {
      const receivedAt = performance.now()
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        const buffer = Buffer.concat(chunks)
        const raw = buffer.toString("utf8")
        let body: any = raw
        try {
          body = raw === "" ? undefined : JSON.parse(raw)
        } catch {}
        const recorded: Recorded = {
          method: req.method ?? "",
          url: req.url ?? "",
          headers: req.headers,
          raw,
          bytes: buffer.length,
          body,
          at: Date.now(),
          receivedAt,
          finishedAt: undefined,
          aborted: false
        }
        if (options.record === undefined || options.record(recorded)) requests.push(recorded)
        res.on("finish", () => {
          recorded.finishedAt = performance.now()
        })
        res.on("close", () => {
          if (!res.writableFinished) recorded.aborted = true
        })
        const handler = queue.shift() ?? options.fallback ?? noHandler
        void handler(req, res, recorded)
      })
    }
    const server = options.tls ? createTlsServer({ ...options.tls }, onRequest) : createServer(onRequest)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resolve({
        url: `${options.tls ? "https" : "http"}://127.0.0.1:${port}`,
        requests,
        reply: (...hs) => queue.push(...hs),
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections()
            server.close(() => done())
          })
      })
    })
  })

/** A node:http server on 127.0.0.1 that answers each request with the next queued handler. */
export const make: Effect.Effect<FakeServer, never, Scope.Scope> = Effect.acquireRelease(
  Effect.promise(() => listen()),
  (server) => Effect.promise(() => server.close())
)

export const json =
  (status: number, body: unknown, headers: Record<string, string> = {}): Handler =>
  (_req, res) => {
    res.writeHead(status, { "content-type": "application/json", ...headers })
    res.end(JSON.stringify(body))
  }

export const text =
  (status: number, body: string, headers: Record<string, string> = {}): Handler =>
  (_req, res) => {
    res.writeHead(status, { "content-type": "text/plain", ...headers })
    res.end(body)
  }

export interface SseEvent {
  readonly event?: string
  readonly data: unknown
}

/** One server-sent event as it goes over the wire. */
export const frame = (e: SseEvent): string =>
  (e.event !== undefined ? `event: ${e.event}\n` : "") +
  `data: ${typeof e.data === "string" ? e.data : JSON.stringify(e.data)}\n\n`

const sseHeaders = { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" }

/**
 * Streams server-sent events, a few milliseconds apart. With `dropAfter`, the socket is destroyed
 * after that many events (a connection dropped mid-stream). With `gapMs: 0` the whole stream goes
 * out in one write.
 */
export const sse =
  (events: ReadonlyArray<SseEvent>, options: { readonly dropAfter?: number; readonly gapMs?: number } = {}): Handler =>
  async (_req, res) => {
    res.writeHead(200, sseHeaders)
    if (options.gapMs === 0 && options.dropAfter === undefined) {
      res.end(events.map(frame).join(""))
      return
    }
    let n = 0
    for (const e of events) {
      if (options.dropAfter !== undefined && n === options.dropAfter) {
        res.socket?.destroy()
        return
      }
      res.write(frame(e))
      n++
      await new Promise((r) => setTimeout(r, options.gapMs ?? 2))
    }
    if (options.dropAfter !== undefined && n === options.dropAfter) {
      res.socket?.destroy()
      return
    }
    res.end()
  }

/** Never answers (until the client goes away). */
export const hang: Handler = () => {}
