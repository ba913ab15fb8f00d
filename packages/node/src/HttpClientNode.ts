/**
 * An `HttpClient` on Node's own `http`/`https` with keep-alive connections, for talking to model
 * servers with less CPU than the runtime's `fetch`.
 *
 * `fetch` (undici) puts every request body through a web `ReadableStream` (a text body is encoded
 * to bytes chunk by chunk, then written piece by piece) and every response through another one; for
 * a 100 KB request and a small streamed answer that is most of a turn's HTTP cost. Here a text or
 * byte body is written in one call (`request.end(body)`, with its `content-length`) and the response
 * is read as a Node stream. A response read to its end gives its connection back to the pool; one
 * given up on while the server is still sending is closed with its connection. Interrupting the
 * caller aborts the request.
 *
 * Unlike `fetch`: at most {@link MAX_REDIRECTS} redirects are followed, never from https to http nor
 * for a streamed body, and to another origin only headers that carry no credential go along;
 * nothing is decompressed (`accept-encoding: identity` is asked for); requests that set no `user-agent` carry
 * `musekit/<version>` (`userAgent` changes or drops it). Proxy variables (`HTTPS_PROXY`, …) are not
 * read, as Node 20's `fetch` does not read them either; pass `agents` for a proxy or a private CA.
 *
 * @example
 * ```ts
 * import { Models } from "@musekit/models"
 * import { HttpClientNode } from "@musekit/node"
 * import { Layer } from "effect"
 *
 * const model = Models.layerWithoutHttpClient("openai/gpt-4.1", { env: process.env }).pipe(
 *   Layer.provide(HttpClientNode.layer)
 * )
 * // your own user-agent: Layer.provide(HttpClientNode.layerWith({ userAgent: "my-agent/1.2" }))
 * ```
 */
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Https from "node:https"
import {
  Cookies,
  Headers,
  HttpBody,
  HttpClient,
  HttpClientError,
  type HttpClientRequest,
  HttpClientResponse,
  HttpIncomingMessage,
  UrlParams
} from "@effect/platform"
import { Effect, Fiber, Inspectable, Layer, Option, Stream } from "effect"
import { readAll, toStream } from "./internal/readableBody.js"

export interface Options {
  /**
   * The `user-agent` of a request that sets none: `musekit/<version>` by default; `false` sends
   * none. A request's own `user-agent` header always wins.
   */
  readonly userAgent?: string | false | undefined
  /**
   * The connection pools, per scheme (default: one keep-alive `Agent` per scheme, shared by the
   * process; idle connections do not keep the process alive). Pass your own for a proxy, a
   * private certificate authority or client certificates; keep `keepAlive: true` to reuse
   * connections.
   */
  readonly agents?: { readonly http?: Http.Agent | undefined; readonly https?: Https.Agent | undefined } | undefined
}

let sharedAgents: { http: Http.Agent; https: Https.Agent } | undefined
const shared = () => {
  // (Node 24 reads proxy variables for its own agents when NODE_USE_ENV_PROXY=1, as its fetch
  // does then; older Node ignores `proxyEnv`)
  const proxy = process.env.NODE_USE_ENV_PROXY === "1" ? { proxyEnv: process.env } : {}
  sharedAgents ??= {
    http: new Http.Agent({ keepAlive: true, ...proxy }),
    https: new Https.Agent({ keepAlive: true, ...proxy })
  }
  return sharedAgents
}

declare const __MUSEKIT_NODE_VERSION__: string | undefined

let defaultUserAgent: string | undefined
/** `musekit/<version of @musekit/node>` (inlined by the build; read from package.json from source). */
const musekitUserAgent = (): string => {
  if (defaultUserAgent !== undefined) return defaultUserAgent
  let version = typeof __MUSEKIT_NODE_VERSION__ === "string" ? __MUSEKIT_NODE_VERSION__ : undefined
  if (version === undefined) {
    try {
      version = JSON.parse(Fs.readFileSync(new URL("../package.json", import.meta.url), "utf8")).version
    } catch {
      // (bundled elsewhere without the define: no version to tell)
    }
  }
  defaultUserAgent = version === undefined ? "musekit" : `musekit/${version}`
  return defaultUserAgent
}

const inMemory = (raw: unknown): string | Uint8Array | undefined =>
  typeof raw === "string"
    ? raw
    : raw instanceof Uint8Array
      ? raw
      : ArrayBuffer.isView(raw)
        ? new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength)
        : raw instanceof ArrayBuffer
          ? new Uint8Array(raw)
          : raw === undefined || raw === null
            ? ""
            : undefined

const transport = (request: HttpClientRequest.HttpClientRequest, cause: unknown) =>
  new HttpClientError.RequestError({ request, reason: "Transport", cause })

/** What goes on the wire for a request (a redirect changes it; the request stays the caller's). */
interface Wire {
  readonly method: string
  readonly headers: Record<string, string>
  readonly body: HttpClientRequest.HttpClientRequest["body"]
}

/** Sends one request; succeeds with the response once its headers are in. */
const send = (
  request: HttpClientRequest.HttpClientRequest,
  url: URL,
  signal: AbortSignal,
  userAgent: string | undefined,
  agent: Http.Agent,
  wire: Wire = request
): Effect.Effect<Response, HttpClientError.HttpClientError> =>
  Effect.async<Response, HttpClientError.HttpClientError>((resume) => {
    const body = wire.body
    const headers: Record<string, string> = { ...wire.headers }
    // (fetch said `node`; a server that wants one sees who is asking)
    if (userAgent !== undefined) headers["user-agent"] ??= userAgent
    // nothing is decompressed here: ask for none (no header would mean any is fine)
    headers["accept-encoding"] ??= "identity"
    const payload = body._tag === "Uint8Array" ? body.body : body._tag === "Raw" ? inMemory(body.body) : undefined
    const contentType = body._tag === "Empty" || body._tag === "FormData" ? undefined : body.contentType
    if (headers["content-type"] === undefined && contentType !== undefined) headers["content-type"] = contentType
    if (payload !== undefined)
      headers["content-length"] = String(typeof payload === "string" ? Buffer.byteLength(payload) : payload.byteLength)
    const options = { method: wire.method, headers, agent }
    const req = url.protocol === "https:" ? Https.request(url, options) : Http.request(url, options)
    // The signal is aborted when the caller is interrupted, and also once the response's stream is
    // done with: a response the server has sent in full keeps its connection for the next request
    // (not `request(url, { signal })`, which would destroy it); anything else is destroyed.
    let finished = false
    let response: Http.IncomingMessage | undefined
    const onAbort = () => {
      if (finished) return
      if (response !== undefined) release(response)
      else req.destroy(new Error("The request was aborted"))
    }
    signal.addEventListener("abort", onAbort, { once: true })
    const settle = () => {
      finished = true
      signal.removeEventListener("abort", onAbort)
    }
    let done = false
    let bodyFiber: Fiber.RuntimeFiber<void> | undefined
    const fail = (cause: unknown) => {
      settle()
      if (done) return
      done = true
      resume(Effect.fail(transport(request, cause)))
    }
    req.on("error", fail)
    req.once("response", (res: Http.IncomingMessage) => {
      if (done) return
      done = true
      // errors of the body from here on are the response stream's
      req.off("error", fail)
      req.on("error", () => {})
      response = res
      res.once("end", settle)
      resume(Effect.succeed(new Response(request, res)))
    })
    switch (body._tag) {
      case "Empty":
        req.end()
        break
      case "Raw":
      case "Uint8Array":
        if (payload !== undefined) req.end(payload)
        // a Blob, a web stream, URLSearchParams…: as fetch would send it
        else
          new globalThis.Response(body.body as ConstructorParameters<typeof globalThis.Response>[0])
            .arrayBuffer()
            .then((bytes) => {
              req.setHeader("content-length", String(bytes.byteLength))
              req.end(new Uint8Array(bytes))
            })
            .catch(fail)
        break
      case "Stream":
        bodyFiber = Effect.runFork(
          Stream.runForEach(body.stream, (chunk) =>
            Effect.async<void>((k) => {
              if (req.write(chunk)) k(Effect.void)
              else req.once("drain", () => k(Effect.void))
            })
          ).pipe(
            Effect.matchCause({
              onSuccess: () => {
                req.end()
              },
              onFailure: (cause) => {
                req.destroy(new Error("request body stream failed", { cause }))
              }
            })
          )
        )
        break
      case "FormData": {
        const web = new globalThis.Response(body.formData)
        web.headers.forEach((value, key) => {
          req.setHeader(key, value)
        })
        web
          .arrayBuffer()
          .then((bytes) => req.end(new Uint8Array(bytes)))
          .catch(fail)
        break
      }
    }
    return Effect.sync(() => {
      done = true
      req.destroy()
      if (bodyFiber !== undefined) Effect.runFork(Fiber.interrupt(bodyFiber))
    })
  })

/**
 * Lets go of a response: one whose bytes have all arrived is read to its end, so its keep-alive
 * connection goes back to the pool; one still arriving is destroyed with its connection.
 */
const release = (res: Http.IncomingMessage): void => {
  if (res.readableEnded || res.destroyed) return
  if (res.complete) res.resume()
  else res.destroy()
}

class Response extends Inspectable.Class implements HttpClientResponse.HttpClientResponse {
  readonly [HttpClientResponse.TypeId]: HttpClientResponse.TypeId = HttpClientResponse.TypeId
  readonly [HttpIncomingMessage.TypeId]: HttpIncomingMessage.TypeId = HttpIncomingMessage.TypeId
  constructor(
    readonly request: HttpClientRequest.HttpClientRequest,
    readonly source: Http.IncomingMessage
  ) {
    super()
  }
  private readonly onError = (cause: unknown) =>
    new HttpClientError.ResponseError({ request: this.request, response: this, reason: "Decode", cause })
  get status(): number {
    return this.source.statusCode ?? 0
  }
  private headersCache: Headers.Headers | undefined
  get headers(): Headers.Headers {
    this.headersCache ??= Headers.fromInput(this.source.headers as Record<string, string | ReadonlyArray<string>>)
    return this.headersCache
  }
  get cookies(): Cookies.Cookies {
    const header = this.source.headers["set-cookie"]
    return Array.isArray(header) ? Cookies.fromSetCookie(header) : Cookies.empty
  }
  get remoteAddress(): Option.Option<string> {
    return Option.fromNullable(this.source.socket?.remoteAddress)
  }
  get stream(): Stream.Stream<Uint8Array, HttpClientError.ResponseError> {
    return toStream(this.source, this.onError).pipe(Stream.ensuring(Effect.sync(() => release(this.source))))
  }
  private bytesCache: Effect.Effect<Buffer, HttpClientError.ResponseError> | undefined
  private get bytes(): Effect.Effect<Buffer, HttpClientError.ResponseError> {
    this.bytesCache ??= Effect.runSync(Effect.cached(readAll(this.source, this.onError, () => release(this.source))))
    return this.bytesCache
  }
  get text(): Effect.Effect<string, HttpClientError.ResponseError> {
    return Effect.map(this.bytes, (bytes) => bytes.toString("utf8"))
  }
  get json(): Effect.Effect<unknown, HttpClientError.ResponseError> {
    return Effect.flatMap(this.text, (text) =>
      Effect.try({ try: () => (text === "" ? null : JSON.parse(text)), catch: this.onError })
    )
  }
  get urlParamsBody(): Effect.Effect<UrlParams.UrlParams, HttpClientError.ResponseError> {
    return Effect.flatMap(this.text, (text) =>
      Effect.try({ try: () => UrlParams.fromInput(new URLSearchParams(text)), catch: this.onError })
    )
  }
  get arrayBuffer(): Effect.Effect<ArrayBuffer, HttpClientError.ResponseError> {
    return Effect.map(
      this.bytes,
      (bytes) => bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer
    )
  }
  get formData(): Effect.Effect<FormData, HttpClientError.ResponseError> {
    return Effect.flatMap(this.arrayBuffer, (bytes) =>
      Effect.tryPromise({
        try: () =>
          new globalThis.Response(bytes, {
            status: this.status,
            headers: this.source.headers as Record<string, string>
          }).formData(),
        catch: this.onError
      })
    )
  }
  toJSON(): unknown {
    return HttpIncomingMessage.inspect(this, {
      _id: "@effect/platform/HttpClientResponse",
      request: this.request.toJSON(),
      status: this.status
    })
  }
}

/** Redirects followed before the last 3xx is returned as it is (as `fetch`'s 20, fewer). */
export const MAX_REDIRECTS = 5

/**
 * The headers sent on to another origin a redirect names: none that could carry a credential (a
 * gateway's own key header included, whatever its name), only these.
 */
const CROSS_ORIGIN_HEADERS = new Set([
  "accept",
  "accept-encoding",
  "accept-language",
  "content-type",
  "user-agent",
  "anthropic-version",
  "anthropic-beta",
  "openai-beta"
])

/**
 * Where a redirect leads and what to send there, or `undefined` to return the 3xx as it is: 307
 * and 308 repeat the request (a body held in memory only), a 303 turns it into a `GET` without a
 * body, a 301 or 302 does so for a `POST` (as `fetch` does); never from https to http, never for a
 * streamed body; to another origin only {@link CROSS_ORIGIN_HEADERS} go along.
 */
const redirect = (res: Response, url: URL, wire: Wire): { url: URL; wire: Wire } | undefined => {
  const status = res.status
  const location = res.source.headers.location
  if (![301, 302, 303, 307, 308].includes(status) || location === undefined) return undefined
  const body = wire.body
  if (body._tag === "Stream" || body._tag === "FormData" || (body._tag === "Raw" && inMemory(body.body) === undefined))
    return undefined
  let next: URL
  try {
    next = new URL(location, url)
  } catch {
    return undefined
  }
  if (next.protocol !== "http:" && next.protocol !== "https:") return undefined
  if (url.protocol === "https:" && next.protocol === "http:") return undefined
  let headers: Record<string, string> = { ...wire.headers }
  if (next.origin !== url.origin)
    headers = Object.fromEntries(Object.entries(headers).filter(([name]) => CROSS_ORIGIN_HEADERS.has(name)))
  const toGet =
    (status === 303 && wire.method !== "GET" && wire.method !== "HEAD") ||
    ((status === 301 || status === 302) && wire.method === "POST")
  if (!toGet) return { url: next, wire: { method: wire.method, headers, body } }
  for (const name of ["content-type", "content-length", "content-encoding", "content-language", "content-location"])
    delete headers[name]
  return { url: next, wire: { method: "GET", headers, body: HttpBody.empty } }
}

/** A client with its own `user-agent` or connection pools; see {@link Options}. */
export const make = (options: Options = {}): HttpClient.HttpClient => {
  const http = options.agents?.http
  const https = options.agents?.https
  const fixed = options.userAgent
  const userAgent = () => (fixed === false ? undefined : (fixed ?? musekitUserAgent()))
  const agentFor = (url: URL) => (url.protocol === "https:" ? (https ?? shared().https) : (http ?? shared().http))
  const follow = (
    request: HttpClientRequest.HttpClientRequest,
    url: URL,
    signal: AbortSignal,
    wire: Wire,
    hops: number
  ): Effect.Effect<HttpClientResponse.HttpClientResponse, HttpClientError.HttpClientError> =>
    Effect.flatMap(send(request, url, signal, userAgent(), agentFor(url), wire), (res) => {
      const next = hops < MAX_REDIRECTS ? redirect(res, url, wire) : undefined
      if (next === undefined) return Effect.succeed(res)
      release(res.source)
      return follow(request, next.url, signal, next.wire, hops + 1)
    })
  return HttpClient.make((request, url, signal) => follow(request, url, signal, request, 0))
}

/** The client with the defaults: `user-agent: musekit/<version>`, the process's keep-alive pools. */
export const client: HttpClient.HttpClient = make()

/** `HttpClient` layer over {@link client}. */
export const layer: Layer.Layer<HttpClient.HttpClient> = Layer.succeed(HttpClient.HttpClient, client)

/** `HttpClient` layer over `make(options)`. */
export const layerWith = (options: Options): Layer.Layer<HttpClient.HttpClient> =>
  Layer.succeed(HttpClient.HttpClient, make(options))
