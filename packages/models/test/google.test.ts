import { LanguageModel } from "@effect/ai"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import * as Fake from "./support/FakeServer.js"
import {
  fast,
  messageOf,
  modelLayer,
  streamedToolRoundTrip,
  streamText,
  Tools,
  toolRoundTrip,
  toolsLayer,
  usageOf
} from "./support/harness.js"

// Wire format: Gemini API generateContent / streamGenerateContent?alt=sse, as documented at
// https://ai.google.dev/api/generate-content

const MODEL = "gemini-2.5-flash"

const usage = (prompt = 8, candidates = 12, cached?: number, thoughts?: number) => ({
  promptTokenCount: prompt,
  candidatesTokenCount: candidates,
  totalTokenCount: prompt + candidates + (thoughts ?? 0),
  ...(cached !== undefined ? { cachedContentTokenCount: cached } : {}),
  ...(thoughts !== undefined ? { thoughtsTokenCount: thoughts } : {}),
  promptTokensDetails: [{ modality: "TEXT", tokenCount: prompt }]
})

const reply = (parts: Array<unknown>, finishReason: string | null = "STOP", u: unknown = usage()) => ({
  candidates: [
    {
      content: { parts, role: "model" },
      ...(finishReason !== null ? { finishReason } : {}),
      index: 0
    }
  ],
  usageMetadata: u,
  modelVersion: MODEL,
  responseId: "Wq3AaIqQHdHWz7IPh8yb4Ac"
})

const callReadFile = (args: unknown = { path: "README.md" }) => ({ functionCall: { name: "read_file", args } })

const textChunks = (words: Array<string>, u: unknown = usage()) =>
  words.map((w, i) => ({
    data: reply([{ text: w }], i === words.length - 1 ? "STOP" : null, i === words.length - 1 ? u : usage(8, i + 1))
  }))

const googleError = (code: number, status: string, message: string, details?: Array<unknown>) => ({
  error: { code, message, status, ...(details ? { details } : {}) }
})

describe("google (Gemini generateContent)", () => {
  it.scopedLive("tool call round trip: handler runs, result goes back as a functionResponse", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(Fake.json(200, reply([callReadFile()])), Fake.json(200, reply([{ text: "README says hello." }])))
      const calls: Array<unknown> = []
      const { first, second } = yield* toolRoundTrip.pipe(
        Effect.provide(toolsLayer(calls)),
        Effect.provide(modelLayer(`google/${MODEL}`, server))
      )
      expect(calls).toEqual([{ path: "README.md" }])
      expect(first.toolCalls.map((c) => c.name)).toEqual(["read_file"])
      expect(second.text).toBe("README says hello.")

      const [req1, req2] = server.requests
      expect(req1!.url).toBe(`/v1beta/models/${MODEL}:generateContent`)
      expect(req1!.headers["x-goog-api-key"]).toBe("gemini-test")
      expect(req1!.body.systemInstruction).toEqual({ parts: [{ text: "You are a test." }] })
      expect(req1!.body.tools).toEqual({
        functionDeclarations: [
          {
            name: "read_file",
            description: "Read a file from the workspace",
            parameters: {
              type: "OBJECT",
              required: ["path"],
              properties: { path: { type: "STRING" }, maxBytes: { type: "NUMBER" } }
            }
          }
        ]
      })
      expect(req2!.body.contents).toEqual([
        { role: "user", parts: [{ text: "Read README.md" }] },
        { role: "model", parts: [{ functionCall: { name: "read_file", args: { path: "README.md" } } }] },
        {
          role: "user",
          parts: [
            { functionResponse: { id: expect.any(String), name: "read_file", response: { content: "# Hello\n" } } }
          ]
        }
      ])
    })
  )

  it.scopedLive("streams text from streamGenerateContent?alt=sse", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(Fake.sse(textChunks(["The ", "quick ", "brown fox"])))
      const out = yield* streamText().pipe(Effect.provide(modelLayer(`google/${MODEL}`, server)))
      expect(out.text).toBe("The quick brown fox")
      expect(out.finish?.reason).toBe("stop")
      expect(server.requests[0]!.url).toBe(`/v1beta/models/${MODEL}:streamGenerateContent?alt=sse`)
    })
  )

  it.scopedLive("streamed tool call: the handler runs and the result goes back", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(Fake.sse([{ data: reply([callReadFile()]) }]), Fake.sse(textChunks(["Done."])))
      const calls: Array<unknown> = []
      const { second } = yield* streamedToolRoundTrip.pipe(
        Effect.provide(toolsLayer(calls)),
        Effect.provide(modelLayer(`google/${MODEL}`, server))
      )
      expect(calls).toEqual([{ path: "README.md" }])
      expect(second.flatMap((p) => (p.type === "text-delta" ? [p.delta] : [])).join("")).toBe("Done.")
      expect(server.requests[1]!.body.contents.at(-1).parts[0].functionResponse.name).toBe("read_file")
    })
  )

  it.scopedLive("usage: thinking tokens count as output; cached content tokens as cached input", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(
        Fake.json(200, reply([{ text: "hi" }], "STOP", usage(4000, 100, 2048, 250))),
        Fake.sse(textChunks(["h", "i"], usage(900, 20, 512, 30)))
      )
      const layer = modelLayer(`google/${MODEL}`, server)
      const whole = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(Effect.provide(layer))
      expect(usageOf(whole.usage)).toEqual({
        inputTokens: 4000,
        outputTokens: 350,
        totalTokens: 4350,
        cachedInputTokens: 2048,
        reasoningTokens: 250
      })
      const streamed = yield* streamText().pipe(Effect.provide(layer))
      expect(usageOf(streamed.finish?.usage)).toEqual({
        inputTokens: 900,
        outputTokens: 50,
        totalTokens: 950,
        cachedInputTokens: 512,
        reasoningTokens: 30
      })
    })
  )

  it.scopedLive("401, and Google's 400 'API key not valid': both name the variable", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(
        Fake.json(
          401,
          googleError(
            401,
            "UNAUTHENTICATED",
            "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential."
          )
        ),
        Fake.json(
          400,
          googleError(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", [
            {
              "@type": "type.googleapis.com/google.rpc.ErrorInfo",
              reason: "API_KEY_INVALID",
              domain: "googleapis.com",
              metadata: { service: "generativelanguage.googleapis.com" }
            }
          ])
        )
      )
      const layer = modelLayer(`google/${MODEL}`, server)
      const e401 = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(Effect.provide(layer), Effect.flip)
      expect(messageOf(e401)).toBe(
        "google rejected the API key (401): Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. Next step: check GEMINI_API_KEY."
      )
      const e400 = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(Effect.provide(layer), Effect.flip)
      expect(messageOf(e400)).toBe(
        "google rejected the API key (400): API key not valid. Please pass a valid API key. Next step: check GEMINI_API_KEY."
      )
      expect(server.requests.length).toBe(2)
    })
  )

  it.scopedLive("429 with retry-after (and RetryInfo in the body): waits (capped), retries, succeeds", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      const exhausted = googleError(429, "RESOURCE_EXHAUSTED", "You exceeded your current quota.", [
        { "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: "1s" }
      ])
      server.reply(
        Fake.json(429, exhausted, { "retry-after": "1" }),
        Fake.json(429, exhausted),
        Fake.json(200, reply([{ text: "after the wait" }]))
      )
      const res = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(
        Effect.provide(modelLayer(`google/${MODEL}`, server))
      )
      expect(res.text).toBe("after the wait")
      expect(server.requests.length).toBe(3)
      const [a, b, c] = server.requests.map((r) => r.at)
      expect(b! - a!).toBeGreaterThanOrEqual(280) // retry-after header, capped at 300 ms
      expect(c! - b!).toBeGreaterThanOrEqual(280) // RetryInfo body, capped at 300 ms
    })
  )

  it.scopedLive("500: retried, then a clear error", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      const boom = Fake.json(500, googleError(500, "INTERNAL", "An internal error has occurred."))
      server.reply(boom, boom, boom)
      const error = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(
        Effect.provide(modelLayer(`google/${MODEL}`, server)),
        Effect.flip
      )
      expect(server.requests.length).toBe(fast.maxRetries + 1)
      expect(messageOf(error)).toBe(
        "google failed with a server error (500) after 2 retries: An internal error has occurred."
      )
    })
  )

  it.scopedLive("malformed tool arguments (wrong types) and an unreadable stream chunk: clear errors", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(
        Fake.json(200, reply([callReadFile({ path: 42 })])),
        Fake.sse([{ data: '{"candidates": [{"content": ' }])
      )
      const calls: Array<unknown> = []
      const layer = modelLayer(`google/${MODEL}`, server)
      const error = yield* LanguageModel.generateText({ prompt: "read it", toolkit: Tools }).pipe(
        Effect.provide(toolsLayer(calls)),
        Effect.provide(layer),
        Effect.flip
      )
      expect(messageOf(error)).toMatch(
        /^google\/gemini-2\.5-flash called tool 'read_file' with arguments that do not match its parameters: /
      )
      expect(calls).toEqual([])

      const error2 = yield* LanguageModel.streamText({ prompt: "hi" }).pipe(
        Stream.runDrain,
        Effect.provide(layer),
        Effect.flip
      )
      expect(messageOf(error2)).toMatch(/^google sent a response that could not be read: /)
    })
  )

  it.scopedLive("connection dropped mid-stream: a clear error", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(
        Fake.sse(textChunks(["a", "b", "c", "d"]), { dropAfter: 2 }),
        Fake.sse(textChunks(["a", "b", "c", "d"]))
      )
      const once = yield* streamText().pipe(Effect.provide(modelLayer(`google/${MODEL}`, server)))
      expect(once.text).toBe("abcd")
      expect(once.deltas).toEqual(["a", "b", "c", "d"])
      server.reply(
        Fake.sse(textChunks(["a", "b", "c", "d"]), { dropAfter: 2 }),
        Fake.sse(textChunks(["a", "b", "c", "d"]), { dropAfter: 2 })
      )
      const error = yield* streamText().pipe(Effect.provide(modelLayer(`google/${MODEL}`, server)), Effect.flip)
      expect(messageOf(error)).toBe("the connection to google dropped mid-response.")
    })
  )
})
