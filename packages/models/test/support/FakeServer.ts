import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { Effect, type Scope } from "effect"

/** A request as the fake server received it. */
export interface Recorded {
  readonly method: string
  readonly url: string
  readonly headers: IncomingMessage["headers"]
  readonly raw: string
  readonly body: any
  readonly at: number
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

/** A node:http server on 127.0.0.1 that answers each request with the next queued handler. */
export const make: Effect.Effect<FakeServer, never, Scope.Scope> = Effect.acquireRelease(
  Effect.async<{ server: ReturnType<typeof createServer>; fake: FakeServer }>((resume) => {
    const queue: Array<Handler> = []
    const requests: Array<Recorded> = []
    const server = createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        const raw = Buffer.concat(chunks).toString("utf8")
        let body: any = raw
        try {
          body = raw === "" ? undefined : JSON.parse(raw)
        } catch {}
        const recorded: Recorded = {
          method: req.method ?? "",
          url: req.url ?? "",
          headers: req.headers,
          raw,
          body,
          at: Date.now(),
          aborted: false
        }
        requests.push(recorded)
        res.on("close", () => {
          if (!res.writableFinished) recorded.aborted = true
        })
        const handler = queue.shift()
        if (handler === undefined) {
          res.writeHead(500, { "content-type": "application/json" })
          res.end(JSON.stringify({ error: { message: "fake server: no handler queued" } }))
          return
        }
        void handler(req, res, recorded)
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resume(
        Effect.succeed({
          server,
          fake: { url: `http://127.0.0.1:${port}`, requests, reply: (...hs) => queue.push(...hs) }
        })
      )
    })
  }),
  ({ server }) =>
    Effect.async<void>((resume) => {
      server.closeAllConnections()
      server.close(() => resume(Effect.void))
    })
).pipe(Effect.map(({ fake }) => fake))

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

const frame = (e: SseEvent) =>
  (e.event !== undefined ? `event: ${e.event}\n` : "") +
  `data: ${typeof e.data === "string" ? e.data : JSON.stringify(e.data)}\n\n`

/**
 * Streams server-sent events, a few milliseconds apart. With `dropAfter`, the socket is destroyed
 * after that many events (a connection dropped mid-stream).
 */
export const sse =
  (events: ReadonlyArray<SseEvent>, options: { readonly dropAfter?: number; readonly gapMs?: number } = {}): Handler =>
  async (_req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" })
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
