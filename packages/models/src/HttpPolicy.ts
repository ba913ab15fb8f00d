/**
 * The HTTP behaviour every provider shares, as one `HttpClient` transform: retries with exponential
 * backoff on 408/409/429/5xx, timeouts and reset connections (honouring `retry-after` /
 * `retry-after-ms`, in seconds or as an HTTP date, and Google's `RetryInfo`; capped), a request
 * timeout, and an idle timeout for streams. A refused connection or an unknown host fails at once.
 * Interrupting the calling fiber aborts the request in flight (the platform client does that; this
 * transform keeps it true across retries and sleeps).
 *
 * The provider clients accept `transformClient`, so the same policy wraps OpenAI, Anthropic, Google
 * and the Chat Completions adapter.
 *
 * @example
 * ```ts
 * import { OpenAiClient } from "@effect/ai-openai"
 * import { HttpPolicy } from "@musekit/models"
 *
 * const client = OpenAiClient.layer({
 *   transformClient: HttpPolicy.transformClient({ maxRetries: 4, timeout: "2 minutes" })
 * })
 * HttpPolicy.parseRetryAfter("120", Date.now()) // 120_000 (ms)
 * ```
 */
import {
  type HttpClient as Client,
  HttpClient,
  HttpClientError,
  type HttpClientRequest,
  type HttpClientResponse
} from "@effect/platform"
import { Clock, Duration, Effect, Random, Stream } from "effect"

/** Options of the policy. Every field has a default. */
export interface Options {
  /** Retries after the first attempt. Default 4. */
  readonly maxRetries?: number | undefined
  /** First backoff delay; doubles each retry, with ±20% jitter. Default 1 second. */
  readonly retryBaseDelay?: Duration.DurationInput | undefined
  /** Cap for any single wait, including a server's `retry-after`. Default 60 seconds. */
  readonly retryMaxDelay?: Duration.DurationInput | undefined
  /**
   * Time allowed for one attempt: until the whole body for ordinary requests, until the response
   * headers for streaming ones. Default 10 minutes.
   */
  readonly timeout?: Duration.DurationInput | undefined
  /** Longest silence allowed between two chunks of a streamed response. Default 5 minutes. */
  readonly idleTimeout?: Duration.DurationInput | undefined
  /** Told before each wait for a retry: how long, and why (for a status line: "retrying in 12 s: rate limited (429)"). */
  readonly onRetry?: ((retry: Retry) => Effect.Effect<void>) | undefined
}

/** A retry about to happen. */
export interface Retry {
  /** 1 for the first retry. */
  readonly attempt: number
  /** Retries allowed in all. */
  readonly maxRetries: number
  /** How long the policy waits before it. */
  readonly delayMs: number
  /** Why, in a few words: `rate limited (429)`, `server error (502)`, `connection reset`, … */
  readonly reason: string
  /** The status of the response that asked for it, when there was one. */
  readonly status?: number | undefined
}

/** The defaults, resolved. */
export const defaults = {
  maxRetries: 4,
  retryBaseDelay: Duration.seconds(1),
  retryMaxDelay: Duration.seconds(60),
  timeout: Duration.minutes(10),
  idleTimeout: Duration.minutes(5)
} as const

/** Marker carried as the `cause` of the error raised when a request or a stream times out. */
export class TimeoutCause {
  readonly _tag = "TimeoutCause"
  constructor(
    readonly kind: "request" | "idle",
    readonly duration: Duration.Duration
  ) {}
  toString(): string {
    return `${this.kind === "request" ? "no response" : "no data"} within ${Duration.format(this.duration)}`
  }
}

/** How the description of an idle-timeout error starts. */
export const idlePrefix = "no data received for"

/** How the description of the error for a successful response that is no event stream starts. */
export const notAStreamPrefix = "expected a stream of events, got"

/** Marker carried as the `cause` of the error raised when a streamed request is answered with a page. */
export class NotAStreamCause {
  readonly _tag = "NotAStreamCause"
  constructor(
    readonly contentType: string,
    readonly body: string
  ) {}
}

/** Why a response is retried, in a few words. */
export const statusReason = (status: number): string =>
  status === 429
    ? "rate limited (429)"
    : status === 529 || status === 503
      ? `overloaded (${status})`
      : status === 408
        ? "request timeout (408)"
        : status === 409
          ? "conflict (409)"
          : `server error (${status})`

/** Status codes that are worth another attempt. 529 is Anthropic's "overloaded". */
export const isRetryableStatus = (status: number): boolean =>
  status === 408 || status === 409 || status === 429 || (status >= 500 && status <= 599)

/**
 * Parses a `retry-after` value (delay-seconds or an HTTP date) into milliseconds from `now`.
 * Returns `undefined` when the value is missing or unreadable; past dates give 0.
 */
export const parseRetryAfter = (value: string | undefined, now: number): number | undefined => {
  if (value === undefined) return undefined
  const v = value.trim()
  if (v === "") return undefined
  if (/^\d+(\.\d+)?$/.test(v)) return Math.round(Number(v) * 1000)
  const at = Date.parse(v)
  if (Number.isNaN(at)) return undefined
  return Math.max(0, at - now)
}

/** The server-requested delay in ms, from `retry-after-ms` (OpenAI) or `retry-after`. */
export const retryAfterMillis = (headers: Readonly<Record<string, string | undefined>>, now: number) => {
  const ms = headers["retry-after-ms"]
  if (ms !== undefined && /^\d+(\.\d+)?$/.test(ms.trim())) return Math.round(Number(ms))
  return parseRetryAfter(headers["retry-after"], now)
}

/**
 * The delay in ms a Google error body asks for (`google.rpc.RetryInfo`: `"retryDelay": "13s"`),
 * for servers that say it in the body instead of a header.
 */
export const retryInfoMillis = (body: string): number | undefined => {
  const m = /"retryDelay"\s*:\s*"(\d+(?:\.\d+)?)s"/.exec(body)
  return m ? Math.round(Number(m[1]) * 1000) : undefined
}

/** The backoff delay in ms before retry number `attempt` (0-based), without jitter. */
export const backoffMillis = (attempt: number, base: Duration.Duration, max: Duration.Duration): number =>
  Math.min(Duration.toMillis(base) * 2 ** attempt, Duration.toMillis(max))

/** System error codes that another attempt will not fix: nothing listens there, or the host does not exist. */
const permanentCodes = new Set(["ECONNREFUSED", "ENOTFOUND"])

const isPermanent = (error: unknown): boolean => {
  let cur: unknown = error
  for (let i = 0; i < 8 && typeof cur === "object" && cur !== null; i++) {
    const code = (cur as { code?: unknown }).code
    if (typeof code === "string" && permanentCodes.has(code)) return true
    if (cur instanceof AggregateError && cur.errors.some(isPermanent)) return true
    cur = (cur as { cause?: unknown }).cause
  }
  return false
}

/** Whether a request asks for a streamed (SSE) response. */
export const isStreamingRequest = (request: HttpClientRequest.HttpClientRequest): boolean => {
  if (request.urlParams.some(([k, v]) => k === "alt" && v === "sse")) return true
  if (request.url.includes("alt=sse") || request.url.includes(":streamGenerateContent")) return true
  const body = request.body
  if (body._tag === "Raw" && typeof body.body === "string") {
    const text = body.body
    if (
      topLevelMember(
        text.length,
        (i) => text.charCodeAt(i),
        (key, from) => text.indexOf(key, from)
      )
    )
      return true
    return looseStreamTrue(text, () => text)
  }
  if (body._tag !== "Uint8Array") return false
  // Look for the key in the bytes, without decoding or parsing the body (a prompt can be large, and
  // this runs for every request): the bytes of JSON's brackets, quotes and backslashes never occur
  // inside a multi-byte UTF-8 character, so the nesting can be followed byte by byte.
  const bytes = Buffer.from(body.body.buffer, body.body.byteOffset, body.body.byteLength)
  if (
    topLevelMember(
      bytes.length,
      (i) => bytes[i]!,
      (key, from) => bytes.indexOf(key, from)
    )
  )
    return true
  // (a body without the key at all is not copied into a string to be sure of it)
  if (bytes.indexOf('"stream"') < 0) return false
  return looseStreamTrue(bytes.toString("latin1"), () => bytes.toString("utf8"))
}

const KEYS = ['"stream":true', '"stream": true'] as const

/**
 * Whether `"stream":true` (or `"stream": true`, as the providers' clients write it) is a member of
 * the JSON text's top-level object, not of an object nested in it (a tool's JSON schema, say). Inside
 * a JSON string a quote is escaped, so a message quoting the text never matches; a match is then
 * checked by following the nesting from the start up to it (no parse, no allocation). The clients
 * write the field last: a match followed by nothing but the closing brace of the text is the top
 * level's (in valid JSON a string cannot end there), and is known without following anything.
 */
const topLevelMember = (
  length: number,
  at: (i: number) => number,
  find: (key: string, from: number) => number
): boolean => {
  let end = length - 1
  while (end >= 0 && isSpace(at(end))) end--
  if (end >= 0 && at(end) === 0x7d) {
    let last = end - 1
    while (last >= 0 && isSpace(at(last))) last--
    for (const key of KEYS) {
      const start = last + 1 - key.length
      if (start > 0 && find(key, start) === start) return true
    }
  }
  let depth = 0
  let inString = false
  let pos = 0
  const next = [find(KEYS[0], 0), find(KEYS[1], 0)]
  for (;;) {
    const k = next[0] === -1 ? 1 : next[1] === -1 ? 0 : next[0]! <= next[1]! ? 0 : 1
    const hit = next[k]!
    if (hit === -1) return false
    for (; pos < hit && pos < length; pos++) {
      const c = at(pos)
      if (inString) {
        if (c === 0x5c)
          pos++ // a backslash escapes the next character
        else if (c === 0x22) inString = false
      } else if (c === 0x22) inString = true
      else if (c === 0x7b || c === 0x5b) depth++
      else if (c === 0x7d || c === 0x5d) depth--
    }
    // (an escape just before the match moved `pos` past it: that match is inside a string)
    if (pos === hit && !inString && depth === 1) return true
    next[k] = find(KEYS[k]!, hit + 1)
  }
}

const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09

/** `"stream"` and `true` with other spacing (a pretty-printed body): rare, so parsed to be sure. */
const looseStreamTrue = (scan: string, text: () => string): boolean => {
  if (!/"stream"\s*:\s*true/.test(scan)) return false
  try {
    return JSON.parse(text())?.stream === true
  } catch {
    return false
  }
}

const withIdleTimeout = (
  response: HttpClientResponse.HttpClientResponse,
  idle: Duration.Duration
): HttpClientResponse.HttpClientResponse =>
  new Proxy(response, {
    get(target, prop) {
      if (prop === "stream") {
        return Stream.timeoutFail(
          Reflect.get(target, prop, target) as Stream.Stream<Uint8Array, HttpClientError.ResponseError>,
          () =>
            new HttpClientError.ResponseError({
              request: target.request,
              response: target,
              reason: "Decode",
              cause: new TimeoutCause("idle", idle),
              description: `${idlePrefix} ${Duration.format(idle)}`
            }),
          idle
        )
      }
      const value = Reflect.get(target, prop, target)
      return typeof value === "function" ? value.bind(target) : value
    }
  })

/**
 * The policy as an `HttpClient` transform, for the `transformClient` option of the provider
 * clients.
 */
export const transformClient =
  (options: Options = {}) =>
  (client: Client.HttpClient): Client.HttpClient => {
    const maxRetries = Math.max(0, Math.floor(options.maxRetries ?? defaults.maxRetries))
    const base = Duration.decode(options.retryBaseDelay ?? defaults.retryBaseDelay)
    const max = Duration.decode(options.retryMaxDelay ?? defaults.retryMaxDelay)
    const timeout = Duration.decode(options.timeout ?? defaults.timeout)
    const idle = Duration.decode(options.idleTimeout ?? defaults.idleTimeout)

    return HttpClient.transform(client, (effect, request) => {
      const streaming = isStreamingRequest(request)
      const timedOut = () =>
        new HttpClientError.RequestError({
          request,
          reason: "Transport",
          cause: new TimeoutCause("request", timeout),
          description: `no response within ${Duration.format(timeout)}`
        })
      // One attempt: the response, with its body read unless it is a successful stream. A page
      // (a proxy's, a login's) where a stream of events was asked for is said to be one, not read
      // as an empty stream.
      const attempt = effect.pipe(
        Effect.flatMap((response) => {
          if (!streaming || response.status >= 300) return Effect.as(response.text, response)
          const contentType = response.headers["content-type"] ?? ""
          if (!/html/i.test(contentType)) return Effect.succeed(withIdleTimeout(response, idle))
          return Effect.flatMap(
            Effect.orElseSucceed(response.text, () => ""),
            (body) =>
              Effect.fail(
                new HttpClientError.ResponseError({
                  request,
                  response,
                  reason: "Decode",
                  cause: new NotAStreamCause(contentType, body),
                  description: `${notAStreamPrefix} ${contentType}`
                })
              )
          )
        }),
        Effect.timeoutFail({ duration: timeout, onTimeout: timedOut })
      )
      const wait = (n: number, serverMs: number | undefined, reason: string, status?: number) =>
        Effect.flatMap(Random.nextRange(0.8, 1.2), (jitter) => {
          const ms = Math.round(
            Math.min(serverMs !== undefined ? serverMs : backoffMillis(n, base, max) * jitter, Duration.toMillis(max))
          )
          const told = options.onRetry
            ? options.onRetry({ attempt: n + 1, maxRetries, delayMs: ms, reason, status })
            : Effect.void
          return Effect.zipRight(told, Effect.sleep(Duration.millis(ms)))
        })
      const serverDelay = (response: HttpClientResponse.HttpClientResponse) =>
        Effect.map(Clock.currentTimeMillis, (now) => retryAfterMillis(response.headers, now)).pipe(
          Effect.flatMap((ms) =>
            ms !== undefined
              ? Effect.succeed(ms)
              : Effect.map(
                  Effect.orElseSucceed(response.text, () => ""),
                  retryInfoMillis
                )
          )
        )
      const loop = (n: number): Effect.Effect<HttpClientResponse.HttpClientResponse, HttpClientError.HttpClientError> =>
        attempt.pipe(
          Effect.flatMap((response) =>
            isRetryableStatus(response.status) && n < maxRetries
              ? serverDelay(response).pipe(
                  Effect.flatMap((ms) => wait(n, ms, statusReason(response.status), response.status)),
                  Effect.zipRight(Effect.suspend(() => loop(n + 1)))
                )
              : Effect.succeed(response)
          ),
          Effect.catchIf(
            (error) =>
              n < maxRetries &&
              ((error._tag === "RequestError" && error.reason === "Transport" && !isPermanent(error)) ||
                (error._tag === "ResponseError" &&
                  error.reason === "Decode" &&
                  !(error.cause instanceof NotAStreamCause))),
            (error) =>
              Effect.zipRight(
                wait(n, undefined, error.cause instanceof TimeoutCause ? String(error.cause) : "connection lost"),
                Effect.suspend(() => loop(n + 1))
              )
          )
        )
      return loop(0)
    })
  }
