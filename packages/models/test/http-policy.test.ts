import { LanguageModel } from "@effect/ai"
import { HttpBody, HttpClientRequest } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Stream } from "effect"
import { HttpPolicy } from "../src/index.js"
import { strictCompatible } from "../src/internal/openaiStrict.js"
import * as Fake from "./support/FakeServer.js"
import { messageOf, modelLayer } from "./support/harness.js"

const waitUntil = (cond: () => boolean, what: string) =>
  Effect.gen(function* () {
    for (let i = 0; i < 200; i++) {
      if (cond()) return
      yield* Effect.sleep("10 millis")
    }
    throw new Error(`timed out waiting for: ${what}`)
  })

const chunk = (content: string) => ({
  data: {
    id: "c",
    object: "chat.completion.chunk",
    created: 1,
    model: "m",
    choices: [{ index: 0, delta: { content }, finish_reason: null }]
  }
})

describe("HttpPolicy", () => {
  it("parses retry-after as seconds or an HTTP date", () => {
    const now = Date.parse("2025-06-01T12:00:00Z")
    expect(HttpPolicy.parseRetryAfter("120", now)).toBe(120_000)
    expect(HttpPolicy.parseRetryAfter("0", now)).toBe(0)
    expect(HttpPolicy.parseRetryAfter("Sun, 01 Jun 2025 12:00:30 GMT", now)).toBe(30_000)
    expect(HttpPolicy.parseRetryAfter("Sun, 01 Jun 2025 11:00:00 GMT", now)).toBe(0)
    expect(HttpPolicy.parseRetryAfter("soon", now)).toBeUndefined()
    expect(HttpPolicy.parseRetryAfter(undefined, now)).toBeUndefined()
    expect(HttpPolicy.retryAfterMillis({ "retry-after-ms": "250", "retry-after": "9" }, now)).toBe(250)
    expect(HttpPolicy.retryInfoMillis('{"error":{"details":[{"retryDelay": "13s"}]}}')).toBe(13_000)
  })

  it("retries only what is worth retrying; backoff doubles up to the cap", () => {
    expect([408, 409, 429, 500, 502, 503, 529].every(HttpPolicy.isRetryableStatus)).toBe(true)
    expect([400, 401, 403, 404, 422].some(HttpPolicy.isRetryableStatus)).toBe(false)
    expect([0, 1, 2, 3, 10].map((n) => HttpPolicy.backoffMillis(n, 1000 as any, 5000 as any))).toEqual([
      1000, 2000, 4000, 5000, 5000
    ])
  })

  it("recognizes streaming requests", () => {
    const post = (body: unknown) => HttpClientRequest.post("/x", { body: HttpBody.unsafeJson(body) })
    expect(HttpPolicy.isStreamingRequest(post({ stream: true, model: "m" }))).toBe(true)
    expect(HttpPolicy.isStreamingRequest(post({ model: "m", messages: [{ content: '"stream":true' }] }))).toBe(false)
    // a body given as its JSON text (the Chat Completions adapter sends one)
    const raw = (body: unknown) =>
      HttpClientRequest.post("/x", { body: HttpBody.raw(JSON.stringify(body), { contentType: "application/json" }) })
    expect(HttpPolicy.isStreamingRequest(raw({ model: "m", stream: true }))).toBe(true)
    expect(HttpPolicy.isStreamingRequest(raw({ model: "m", messages: [{ content: '"stream":true' }] }))).toBe(false)
    expect(HttpPolicy.isStreamingRequest(raw({ model: "m", stream: false }))).toBe(false)
    expect(
      HttpPolicy.isStreamingRequest(
        HttpClientRequest.post("/v1beta/models/g:streamGenerateContent", { urlParams: { alt: "sse" } })
      )
    ).toBe(true)
  })

  it("decides by the top-level stream field: a tool schema or a nested object saying stream true is not a stream", () => {
    const post = (body: unknown) => HttpClientRequest.post("/x", { body: HttpBody.unsafeJson(body) })
    const raw = (text: string) =>
      HttpClientRequest.post("/x", { body: HttpBody.raw(text, { contentType: "application/json" }) })
    const schemaSaysStream = {
      model: "m",
      messages: [{ role: "user", content: 'say {"stream":true}' }],
      tools: [
        {
          type: "function",
          function: {
            name: "tail",
            parameters: { type: "object", properties: { stream: true }, default: { stream: true } }
          }
        }
      ],
      metadata: { stream: true }
    }
    for (const text of [JSON.stringify(schemaSaysStream), JSON.stringify(schemaSaysStream, null, 1)]) {
      expect(HttpPolicy.isStreamingRequest(raw(text))).toBe(false)
    }
    expect(HttpPolicy.isStreamingRequest(post(schemaSaysStream))).toBe(false)
    expect(HttpPolicy.isStreamingRequest(post({ ...schemaSaysStream, stream: false }))).toBe(false)
    // the same body asking for a stream, the field before or after the nested ones, compact or spaced
    expect(HttpPolicy.isStreamingRequest(post({ ...schemaSaysStream, stream: true }))).toBe(true)
    expect(HttpPolicy.isStreamingRequest(post({ stream: true, ...schemaSaysStream }))).toBe(true)
    expect(HttpPolicy.isStreamingRequest(raw(JSON.stringify({ ...schemaSaysStream, stream: true }, null, 1)))).toBe(
      true
    )
    expect(HttpPolicy.isStreamingRequest(raw('{"tools":[{"stream": true}], "stream": true}'))).toBe(true)
    // a string ending in a backslash just before the key, and one holding brackets and quotes
    expect(HttpPolicy.isStreamingRequest(post({ a: "x\\", b: '}]{["\\"', stream: true }))).toBe(true)
    expect(HttpPolicy.isStreamingRequest(post({ a: '{"stream":true}', b: { c: "]}" } }))).toBe(false)
  })

  it("OpenAI strict mode only where the schema allows it", () => {
    const obj = (properties: Record<string, unknown>, required: Array<string>, extra = {}) => ({
      type: "object",
      properties,
      required,
      additionalProperties: false,
      ...extra
    })
    expect(strictCompatible(obj({ a: { type: "string" } }, ["a"]))).toBe(true)
    expect(strictCompatible(obj({ a: { type: "string" }, b: { type: "number" } }, ["a"]))).toBe(false)
    expect(strictCompatible(obj({ a: obj({ b: { type: "string" } }, []) }, ["a"]))).toBe(false)
    expect(strictCompatible(obj({ a: { type: "array", items: obj({ b: { type: "string" } }, ["b"]) } }, ["a"]))).toBe(
      true
    )
    expect(strictCompatible({ type: "object", properties: { a: { type: "string" } }, required: ["a"] })).toBe(false)
  })

  it.scopedLive("interrupting the fiber aborts the HTTP request", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(Fake.hang)
      const fiber = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(
        Effect.provide(modelLayer("ollama/llama3.2", server, "/v1")),
        Effect.fork
      )
      yield* waitUntil(() => server.requests.length === 1, "the request")
      yield* Fiber.interrupt(fiber)
      yield* waitUntil(() => server.requests[0]!.aborted, "the server to see the abort")
      expect(server.requests.length).toBe(1)
    })
  )

  it.scopedLive("a consumer that stops reading a stream aborts the request", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply((_req, res) => {
        res.writeHead(200, { "content-type": "text/event-stream" })
        res.write(`data: ${JSON.stringify(chunk("first").data)}\n\n`)
        // …and never ends
      })
      const deltas = yield* LanguageModel.streamText({ prompt: "hi" }).pipe(
        Stream.filter((p) => p.type === "text-delta"),
        Stream.take(1),
        Stream.runCollect,
        Effect.provide(modelLayer("ollama/llama3.2", server, "/v1"))
      )
      expect([...deltas].map((p) => (p as { delta: string }).delta)).toEqual(["first"])
      yield* waitUntil(() => server.requests[0]!.aborted, "the server to see the abort")
    })
  )

  it.scopedLive("request timeout: each attempt is cut off, then a clear error", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(Fake.hang, Fake.hang)
      const started = Date.now()
      const error = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(
        Effect.provide(modelLayer("ollama/llama3.2", server, "/v1", { timeout: "150 millis", maxRetries: 1 })),
        Effect.flip
      )
      expect(Date.now() - started).toBeLessThan(2000)
      expect(messageOf(error)).toBe("ollama did not respond within 150ms (tried 2 times).")
      expect(server.requests.length).toBe(2)
      yield* waitUntil(() => server.requests.every((r) => r.aborted), "both attempts aborted")
    })
  )

  it.scopedLive("idle timeout: a stream that goes silent fails clearly", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      const silent = (_req: any, res: any) => {
        res.writeHead(200, { "content-type": "text/event-stream" })
        res.write(`data: ${JSON.stringify(chunk("tick").data)}\n\n`)
      }
      // asked once more after the first silence, then a clear error
      server.reply(silent, silent)
      const error = yield* LanguageModel.streamText({ prompt: "hi" }).pipe(
        Stream.runDrain,
        Effect.provide(modelLayer("ollama/llama3.2", server, "/v1", { idleTimeout: "150 millis" })),
        Effect.flip
      )
      expect(messageOf(error)).toBe("ollama stopped sending data mid-response (no data received for 150ms).")
      yield* waitUntil(() => server.requests[0]!.aborted, "the server to see the abort")
    })
  )
})
