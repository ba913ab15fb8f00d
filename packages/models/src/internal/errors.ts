import { AiError } from "@effect/ai"
import { Duration } from "effect"
import { idlePrefix, notAStreamPrefix, TimeoutCause } from "../HttpPolicy.js"

/** What an error message may mention about the model in use. */
export interface ErrorContext {
  /** Provider name as written in the spec (`anthropic`, `ollama`, …). */
  readonly provider: string
  /** Human-readable provider name (`llama.cpp server`). */
  readonly label: string
  readonly model: string
  readonly baseUrl: string
  readonly local: boolean
  /** Environment variable the key came from, if any. */
  readonly apiKeyVariable: string | undefined
  /** Environment variable a key would be read from. */
  readonly apiKeyHint: string
  readonly maxRetries: number
}

// Subclasses keep the @effect/ai tags and fields (so `catchTag("HttpResponseError")` and
// `error.response.status` keep working) and replace the multi-paragraph default message with
// the one sentence a user needs.

export class ProviderResponseError extends AiError.HttpResponseError {
  override get message(): string {
    return this.description ?? super.message
  }
}

export class ProviderRequestError extends AiError.HttpRequestError {
  override get message(): string {
    return this.description ?? super.message
  }
}

export class ProviderMalformedOutput extends AiError.MalformedOutput {
  override get message(): string {
    return this.description ?? "the model's response could not be read"
  }
}

export class ProviderError extends AiError.UnknownError {
  override get message(): string {
    return this.description ?? super.message
  }
}

const causes = (u: unknown): Array<unknown> => {
  const out: Array<unknown> = []
  let cur: unknown = u
  for (let i = 0; i < 8 && cur !== undefined && cur !== null; i++) {
    out.push(cur)
    if (cur instanceof AggregateError) out.push(...cur.errors)
    cur = (cur as { cause?: unknown }).cause
  }
  return out
}

const findTimeout = (u: unknown): TimeoutCause | undefined =>
  causes(u).find((c): c is TimeoutCause => c instanceof TimeoutCause)

const findCode = (u: unknown): string | undefined => {
  for (const c of causes(u)) {
    const code = (c as { code?: unknown })?.code
    if (typeof code === "string") return code
  }
  return undefined
}

const lowLevelMessage = (u: unknown): string | undefined => {
  const all = causes(u)
  for (let i = all.length - 1; i >= 0; i--) {
    const m = (all[i] as { message?: unknown })?.message
    if (typeof m === "string" && m !== "") return m
  }
  return undefined
}

const secretHeaders = new Set([
  "authorization",
  "proxy-authorization",
  "x-api-key",
  "api-key",
  "x-goog-api-key",
  "cookie",
  "set-cookie",
  "openai-organization",
  "openai-project"
])

/** Header values that could hold a credential, replaced: errors end up in logs. */
export const scrubHeaders = (headers: Readonly<Record<string, string>>): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(headers)) out[k] = secretHeaders.has(k.toLowerCase()) ? "<redacted>" : v
  return out
}

const scrubRequest = <R extends { readonly headers: Readonly<Record<string, string>> }>(request: R): R => ({
  ...request,
  headers: scrubHeaders(request.headers)
})

/** The innermost cause that is not a platform HTTP error (those carry the request and its headers). */
const lowLevelCause = (u: unknown): unknown => {
  const all = causes(u).slice(1)
  for (let i = all.length - 1; i >= 0; i--) {
    const c = all[i] as { _tag?: unknown; request?: unknown } | undefined
    if (c && typeof c === "object" && !("request" in c)) return c
  }
  return undefined
}

const shorten = (s: string, n = 300) => {
  const one = s.replace(/\s+/g, " ").trim()
  return one.length > n ? one.slice(0, n) + "…" : one
}

/**
 * The response body @effect/ai captured, or undefined. When reading the body failed it captures the
 * read error instead (a dump of the request, headers included): that is not a body.
 */
const responseBody = (body: string | undefined): string | undefined => {
  if (body === undefined) return undefined
  const b = body.trim()
  if (b === "" || b === "undefined" || b.includes('"@effect/platform/HttpClientRequest"')) return undefined
  if (b.startsWith('"')) {
    // text bodies arrive JSON-encoded
    try {
      const text = JSON.parse(b)
      if (typeof text === "string") return text.trim() === "" ? undefined : text
    } catch {}
  }
  return b
}

/** The provider's own explanation, from an error response body. */
export const providerDetail = (raw: string | undefined): string | undefined => {
  const body = responseBody(raw)
  if (body === undefined) return undefined
  let parsed: unknown
  try {
    parsed = JSON.parse(body)
  } catch {
    return shorten(body)
  }
  if (typeof parsed === "string") return shorten(parsed)
  const b = parsed as Record<string, any> | null
  const candidates = [b?.error?.message, typeof b?.error === "string" ? b.error : undefined, b?.message, b?.detail]
  const hit = candidates.find((c): c is string => typeof c === "string" && c.trim() !== "")
  return hit ? shorten(hit) : shorten(body)
}

const sentence = (s: string) => (/[.!?…]$/.test(s) ? s : s + ".")

const withDetail = (head: string, detail: string | undefined) => sentence(detail ? `${head}: ${detail}` : head)

const retries = (n: number) => (n === 1 ? "1 retry" : `${n} retries`)

const keyAdvice = (ctx: ErrorContext) =>
  ctx.apiKeyVariable !== undefined
    ? `check ${ctx.apiKeyVariable}`
    : ctx.local
      ? `set ${ctx.apiKeyHint} if the server needs a key`
      : `check the API key (${ctx.apiKeyHint})`

const statusMessage = (ctx: ErrorContext, status: number, detail: string | undefined, url: string): string => {
  const p = ctx.provider
  const looksLikeKey = detail !== undefined && /api[ _-]?key/i.test(detail) && (status === 400 || status === 403)
  if (status === 401 || looksLikeKey) {
    const head =
      ctx.local && ctx.apiKeyVariable === undefined
        ? `${p} refused the request as unauthorized`
        : `${p} rejected the API key`
    return `${head} (${status})${detail ? `: ${sentence(detail)}` : "."} Next step: ${keyAdvice(ctx)}.`
  }
  if (status === 403) return withDetail(`${p} refused access to ${ctx.model} (403)`, detail)
  if (status === 404) return withDetail(`${p} has no model '${ctx.model}' or no endpoint at ${url} (404)`, detail)
  if (status === 413) return withDetail(`the request is too large for ${p} (413)`, detail)
  if (status === 429)
    return withDetail(`${p} is rate-limiting requests (429) and still was after ${retries(ctx.maxRetries)}`, detail)
  if (status === 529 || status === 503)
    return withDetail(`${p} is overloaded (${status}) and still was after ${retries(ctx.maxRetries)}`, detail)
  if (status >= 500)
    return withDetail(`${p} failed with a server error (${status}) after ${retries(ctx.maxRetries)}`, detail)
  return withDetail(`${p} rejected the request (${status})`, detail)
}

/** A successful response that is a page (a proxy's, a login's) where a stream of events was asked for. */
const pageMessage = (ctx: ErrorContext, status: number, contentType: string, body: string): string => {
  const title = /<title[^>]*>([^<]*)<\/title>/i.exec(body)?.[1]?.trim()
  const text = title || shorten(body.replace(/<[^>]*>/g, " "), 120)
  return `${ctx.provider} answered with a page (${status}, ${contentType || "no content type"}) where a stream of events was expected${
    text ? `: ${JSON.stringify(text)}` : ""
  }. Next step: check that ${ctx.baseUrl} is the address of the API; a proxy or a login page may be answering instead.`
}

const toolName = (description: string) => /tool '([^']*)'/.exec(description)?.[1] ?? "?"

/** Rewrites an @effect/ai error into the same error with a message a user can act on. */
export const clarify = (ctx: ErrorContext, error: unknown): unknown => {
  if (!AiError.isAiError(error)) return error
  if (
    error instanceof ProviderResponseError ||
    error instanceof ProviderRequestError ||
    error instanceof ProviderMalformedOutput ||
    error instanceof ProviderError
  )
    return error
  const p = ctx.provider
  switch (error._tag) {
    case "HttpResponseError": {
      let description: string
      const status = error.response.status
      if (error.reason === "StatusCode" || status >= 300) {
        description = statusMessage(ctx, status, providerDetail(error.body), error.request.url)
      } else {
        // @effect/ai keeps the platform error's description but not its cause
        const d = error.description
        const body = responseBody(error.body) ?? ""
        description = d?.startsWith(notAStreamPrefix)
          ? pageMessage(ctx, status, d.slice(notAStreamPrefix.length).trim(), body)
          : d?.startsWith(idlePrefix)
            ? `${p} stopped sending data mid-response (${d}).`
            : body !== ""
              ? `${p} sent a response that could not be read: ${JSON.stringify(shorten(body, 200))}`
              : `the connection to ${p} dropped mid-response${d ? ` (${d})` : ""}.`
      }
      return new ProviderResponseError(
        {
          module: error.module,
          method: error.method,
          request: scrubRequest(error.request),
          response: { ...error.response, headers: scrubHeaders(error.response.headers) },
          reason: error.reason,
          ...(responseBody(error.body) !== undefined ? { body: responseBody(error.body)! } : {}),
          description
        },
        { disableValidation: true }
      )
    }
    case "HttpRequestError": {
      const timeout = findTimeout(error)
      const code = findCode(error)
      let description: string
      if (timeout !== undefined)
        description = `${p} did not respond within ${Duration.format(timeout.duration)}${ctx.maxRetries > 0 ? ` (tried ${ctx.maxRetries + 1} times)` : ""}.`
      else if (code === "ECONNREFUSED")
        description = `could not connect to ${p} at ${ctx.baseUrl}: connection refused${ctx.local ? ` (is ${ctx.label} running?)` : ""}.`
      else if (code === "ENOTFOUND" || code === "EAI_AGAIN")
        description = `could not reach ${p}: the host of ${ctx.baseUrl} was not found.`
      else if (error.reason === "Transport")
        description = `could not reach ${p} at ${ctx.baseUrl}: ${lowLevelMessage(error.cause) ?? error.description ?? "transport error"}.`
      else description = `could not send the request to ${p}: ${error.description ?? error.reason}.`
      return new ProviderRequestError(
        {
          module: error.module,
          method: error.method,
          reason: error.reason,
          request: scrubRequest(error.request),
          ...(lowLevelCause(error) !== undefined ? { cause: lowLevelCause(error) } : {}),
          description
        },
        { disableValidation: true }
      )
    }
    case "MalformedOutput": {
      const d = error.description ?? ""
      let description: string
      if (d.startsWith("Failed to securely parse tool call parameters")) {
        const params = /Parameters: ([\s\S]*)$/.exec(d)?.[1] ?? ""
        description = `${p} returned malformed JSON arguments for tool '${toolName(d)}': ${JSON.stringify(shorten(params, 200))}`
      } else if (d.startsWith("Failed to decode tool call parameters")) {
        description = `${p}/${ctx.model} called tool '${toolName(d)}' with arguments that do not match its parameters: ${shorten(lowLevelMessage(error.cause) ?? d, 300)}`
      } else if (d.startsWith("Failed to find tool with name")) {
        description = `${p}/${ctx.model} called a tool that does not exist: ${shorten(d.replace(/^Failed to find tool with name /, ""))}`
      } else if (d !== "") {
        description = d
      } else {
        description = `${p} sent a response that could not be read: ${shorten(lowLevelMessage(error.cause) ?? "unknown shape", 300)}`
      }
      return new ProviderMalformedOutput(
        {
          module: error.module,
          method: error.method,
          ...(error.cause !== undefined ? { cause: error.cause } : {}),
          description
        },
        { disableValidation: true }
      )
    }
    case "UnknownError": {
      return new ProviderError(
        {
          module: error.module,
          method: error.method,
          ...(error.cause !== undefined ? { cause: error.cause } : {}),
          description: error.description ?? `${p} failed`
        },
        { disableValidation: true }
      )
    }
    default:
      return error
  }
}

/** The error for a stream that ended without the provider saying it was complete. */
export const incompleteStream = (ctx: ErrorContext, method: string) =>
  new ProviderMalformedOutput(
    {
      module: "Models",
      method,
      description: `the connection to ${ctx.provider} closed before the response was complete.`
    },
    { disableValidation: true }
  )
