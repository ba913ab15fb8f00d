import { LanguageModel, Tool, Toolkit } from "@effect/ai"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Encoding, Schema, Stream } from "effect"
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

// ---------------------------------------------------------------------------------------------
// What the adapter writes and reads beyond the round trips above

const Point = Schema.Struct({ x: Schema.Number, y: Schema.Number }).annotations({ identifier: "Point" })
const Draw = Tool.make("draw", {
  description: "Draw a line",
  parameters: { from: Point, to: Point, style: Schema.Literal("solid", "dashed") },
  success: Schema.String
})
const Now = Tool.make("now", { description: "The time", success: Schema.String })
const Drawing = Toolkit.make(Draw, Now)
const drawingLayer = Drawing.toLayer({ draw: () => Effect.succeed("drawn"), now: () => Effect.succeed("12:00") })

const png = new Uint8Array([137, 80, 78, 71, 13, 10, 26, 10])

describe("google: request and response details", () => {
  it.scopedLive(
    "request: files inline or by URL, config and maxOutputTokens, tool choice, shared schemas, signatures",
    () =>
      Effect.gen(function* () {
        const server = yield* Fake.make
        server.reply(Fake.json(200, reply([{ text: "A square." }])))
        const layer = modelLayer(`google/${MODEL}`, server, "", {
          maxOutputTokens: 256,
          config: {
            generationConfig: { temperature: 0 },
            safetySettings: [{ category: "HARM_CATEGORY_HARASSMENT", threshold: "BLOCK_NONE" }]
          }
        })
        const res = yield* LanguageModel.generateText({
          prompt: [
            { role: "system", content: "Be brief." },
            {
              role: "user",
              content: [
                { type: "text", text: "What is in these?" },
                { type: "file", mediaType: "image/png", data: png },
                { type: "file", mediaType: "application/pdf", data: new URL("https://example.com/a.pdf") },
                { type: "file", mediaType: "image/*", data: `data:image/webp;base64,${Encoding.encodeBase64(png)}` }
              ]
            },
            {
              role: "assistant",
              content: [
                { type: "reasoning", text: "The time first.", options: { google: { thoughtSignature: "sig-0" } } },
                {
                  type: "tool-call",
                  id: "c1",
                  name: "now",
                  params: {},
                  options: { google: { thoughtSignature: "sig-1" } }
                }
              ]
            },
            {
              role: "tool",
              content: [
                {
                  type: "tool-result",
                  id: "c1",
                  name: "now",
                  result: "12:00",
                  isFailure: false,
                  providerExecuted: false
                }
              ]
            },
            { role: "assistant", content: [] },
            { role: "user", content: "Draw it" }
          ],
          toolkit: Drawing,
          toolChoice: { tool: "draw" },
          disableToolCallResolution: true
        }).pipe(Effect.provide(drawingLayer), Effect.provide(layer))
        expect(res.text).toBe("A square.")

        const body = server.requests[0]!.body
        expect(body.systemInstruction).toEqual({ parts: [{ text: "Be brief." }] })
        expect(body.contents).toEqual([
          {
            role: "user",
            parts: [
              { text: "What is in these?" },
              { inlineData: { mimeType: "image/png", data: Encoding.encodeBase64(png) } },
              { fileData: { mimeType: "application/pdf", fileUri: "https://example.com/a.pdf" } },
              { inlineData: { mimeType: "image/webp", data: Encoding.encodeBase64(png) } }
            ]
          },
          {
            role: "model",
            parts: [
              { text: "The time first.", thought: true, thoughtSignature: "sig-0" },
              { functionCall: { name: "now", args: {} }, thoughtSignature: "sig-1" }
            ]
          },
          { role: "user", parts: [{ functionResponse: { id: "c1", name: "now", response: { output: "12:00" } } }] },
          { role: "user", parts: [{ text: "Draw it" }] }
        ])
        expect(body.generationConfig).toEqual({ temperature: 0, maxOutputTokens: 256 })
        expect(body.safetySettings).toEqual([{ category: "HARM_CATEGORY_HARASSMENT", threshold: "BLOCK_NONE" }])
        expect(body.toolConfig).toEqual({ functionCallingConfig: { mode: "ANY", allowedFunctionNames: ["draw"] } })
        const point = {
          type: "OBJECT",
          properties: { x: { type: "NUMBER" }, y: { type: "NUMBER" } },
          required: ["x", "y"]
        }
        expect(body.tools).toEqual({
          functionDeclarations: [
            {
              name: "draw",
              description: "Draw a line",
              parameters: {
                type: "OBJECT",
                properties: { from: point, to: point, style: { type: "STRING", enum: ["solid", "dashed"] } },
                required: ["from", "to", "style"]
              }
            },
            { name: "now", description: "The time" }
          ]
        })
      })
  )

  it.scopedLive("response: thoughts as reasoning with their signature, function call ids kept, finish reasons", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      const thought = { text: "Counting.", thought: true, thoughtSignature: "sig-a" }
      server.reply(
        Fake.json(
          200,
          reply([thought, { text: "4" }, { inlineData: { mimeType: "image/png", data: "iVBORw0K" } }], "MAX_TOKENS")
        ),
        Fake.sse([
          { data: reply([thought], null) },
          { data: reply([{ text: "Let me draw." }], null) },
          {
            data: reply(
              [
                {
                  functionCall: { id: "fc-1", name: "now", args: {} },
                  thoughtSignature: "sig-b"
                }
              ],
              "STOP"
            )
          }
        ]),
        Fake.json(200, reply([{ text: "…" }], "SAFETY"))
      )
      const layer = modelLayer(`google/${MODEL}`, server)
      const whole = yield* LanguageModel.generateText({ prompt: "2+2" }).pipe(Effect.provide(layer))
      expect(whole.reasoningText).toBe("Counting.")
      expect(whole.text).toBe("4")
      expect(whole.finishReason).toBe("length")
      const reasoning = whole.content.find((p) => p.type === "reasoning")
      expect(reasoning?.metadata).toEqual({ google: { thoughtSignature: "sig-a" } })
      const file = whole.content.find((p) => p.type === "file")
      expect(file?.mediaType).toBe("image/png")

      const streamed = yield* LanguageModel.streamText({
        prompt: "draw",
        toolkit: Drawing,
        disableToolCallResolution: true
      }).pipe(Stream.runCollect, Effect.provide(drawingLayer), Effect.provide(layer))
      const parts = Chunk.toArray(streamed) as Array<any>
      expect(parts.map((p) => p.type)).toEqual([
        "response-metadata",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "text-start",
        "text-delta",
        "tool-params-start",
        "tool-params-delta",
        "tool-params-end",
        "tool-call",
        "text-end",
        "finish"
      ])
      const call = parts.find((p) => p.type === "tool-call")
      expect(call).toMatchObject({ id: "fc-1", name: "now", params: {} })
      expect(call.metadata).toEqual({ google: { thoughtSignature: "sig-b" } })
      expect(parts.find((p) => p.type === "reasoning-delta").metadata).toEqual({
        google: { thoughtSignature: "sig-a" }
      })
      expect(parts.at(-1).reason).toBe("tool-calls")

      const filtered = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(Effect.provide(layer))
      expect(filtered.finishReason).toBe("content-filter")
    })
  )

  it.scopedLive("errors: a 400 body, a blocked prompt, an error event mid-stream, a stream without a finish", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      const unfinished = Fake.sse([{ data: reply([{ text: "a" }], null) }])
      server.reply(
        Fake.json(
          400,
          googleError(400, "INVALID_ARGUMENT", "* GenerateContentRequest.contents: contents is not specified")
        ),
        Fake.json(200, { promptFeedback: { blockReason: "PROHIBITED_CONTENT" }, usageMetadata: usage(5, 0) }),
        Fake.sse([
          { data: reply([{ text: "a" }], null) },
          { data: googleError(500, "INTERNAL", "Internal error encountered.") }
        ]),
        unfinished,
        unfinished
      )
      const layer = modelLayer(`google/${MODEL}`, server)
      const bad = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(Effect.provide(layer), Effect.flip)
      expect(messageOf(bad)).toBe(
        "google rejected the request (400): * GenerateContentRequest.contents: contents is not specified."
      )
      expect(server.requests.length).toBe(1) // a 400 is not retried
      const blocked = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(Effect.provide(layer), Effect.flip)
      expect(messageOf(blocked)).toBe(
        "google blocked the prompt (PROHIBITED_CONTENT). Next step: rephrase the request or remove the content it objects to."
      )
      const midStream = yield* streamText().pipe(Effect.provide(layer), Effect.flip)
      expect(messageOf(midStream)).toBe("google reported an error mid-stream: Internal error encountered. (INTERNAL)")
      const cut = yield* streamText().pipe(Effect.provide(layer), Effect.flip)
      expect(messageOf(cut)).toBe("the connection to google closed before the response was complete.")
      expect(server.requests.length).toBe(5) // the stream without a finish was asked for once more
      expect(server.requests[0]!.headers["x-goog-api-key"]).toBe("gemini-test")
      expect(JSON.stringify(bad)).not.toContain("gemini-test")
    })
  )
})
