import { type AddressInfo, createServer } from "node:net"
import { IdGenerator, LanguageModel } from "@effect/ai"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Stream } from "effect"
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

// Wire format: Chat Completions (POST /v1/chat/completions), as documented at
// https://platform.openai.com/docs/api-reference/chat and served by Ollama, vLLM, llama.cpp, LM Studio,
// OpenRouter and Meta's Llama API.

const completion = (
  message: Record<string, unknown>,
  finish_reason: string,
  usage: unknown = { prompt_tokens: 50, completion_tokens: 20, total_tokens: 70 }
) => ({
  id: "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
  object: "chat.completion",
  created: 1741570283,
  model: "llama3.2",
  system_fingerprint: "fp_ollama",
  choices: [{ index: 0, message: { role: "assistant", ...message }, logprobs: null, finish_reason }],
  usage
})

const toolCall = (args: string, id = "call_abc123", index = 0) => ({
  id,
  index,
  type: "function",
  function: { name: "read_file", arguments: args }
})

const chunk = (delta: Record<string, unknown>, finish_reason: string | null = null) => ({
  data: {
    id: "chatcmpl-123",
    object: "chat.completion.chunk",
    created: 1741570283,
    model: "llama3.2",
    system_fingerprint: "fp_ollama",
    choices: [{ index: 0, delta, logprobs: null, finish_reason }]
  }
})

const usageChunk = (usage: unknown) => ({
  data: {
    id: "chatcmpl-123",
    object: "chat.completion.chunk",
    created: 1741570283,
    model: "llama3.2",
    choices: [],
    usage
  }
})

const DONE = { data: "[DONE]" }

const textStream = (
  words: Array<string>,
  usage: unknown = { prompt_tokens: 9, completion_tokens: 3, total_tokens: 12 }
) => [
  chunk({ role: "assistant", content: "" }),
  ...words.map((w) => chunk({ content: w })),
  chunk({}, "stop"),
  usageChunk(usage),
  DONE
]

const SPEC = "ollama/llama3.2"

describe("openai-compatible (Chat Completions)", () => {
  it.scopedLive("tool call round trip: assistant tool_calls and a role:tool message go back", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(
        Fake.json(200, completion({ content: null, tool_calls: [toolCall('{"path":"README.md"}')] }, "tool_calls")),
        Fake.json(200, completion({ content: "README says hello." }, "stop"))
      )
      const calls: Array<unknown> = []
      const { first, second } = yield* toolRoundTrip.pipe(
        Effect.provide(toolsLayer(calls)),
        Effect.provide(modelLayer(SPEC, server, "/v1"))
      )
      expect(calls).toEqual([{ path: "README.md" }])
      expect(first.finishReason).toBe("tool-calls")
      expect(second.text).toBe("README says hello.")

      const [req1, req2] = server.requests
      expect(req1!.url).toBe("/v1/chat/completions")
      expect(req1!.headers.authorization).toBeUndefined() // local preset: no key needed
      expect(req1!.body).toEqual({
        model: "llama3.2",
        messages: [
          { role: "system", content: "You are a test." },
          { role: "user", content: "Read README.md" }
        ],
        tools: [
          {
            type: "function",
            function: {
              name: "read_file",
              description: "Read a file from the workspace",
              parameters: {
                type: "object",
                required: ["path"],
                properties: { path: { type: "string" }, maxBytes: { type: "number" } },
                additionalProperties: false
              }
            }
          }
        ],
        tool_choice: "auto"
      })
      expect(req2!.body.messages).toEqual([
        { role: "system", content: "You are a test." },
        { role: "user", content: "Read README.md" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "call_abc123", type: "function", function: { name: "read_file", arguments: '{"path":"README.md"}' } }
          ]
        },
        { role: "tool", tool_call_id: "call_abc123", content: '{"content":"# Hello\\n"}' }
      ])
    })
  )

  it.scopedLive("streams text; stops at data: [DONE]; asks for usage in the stream", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(Fake.sse(textStream(["Hel", "lo", " world"])))
      const out = yield* streamText().pipe(Effect.provide(modelLayer(SPEC, server, "/v1")))
      expect(out.deltas).toEqual(["Hel", "lo", " world"])
      expect(out.finish?.reason).toBe("stop")
      expect(out.parts.map((p) => p.type)).toEqual([
        "response-metadata",
        "text-start",
        "text-delta",
        "text-delta",
        "text-delta",
        "text-end",
        "finish"
      ])
      expect(server.requests[0]!.body).toMatchObject({ stream: true, stream_options: { include_usage: true } })
    })
  )

  it.scopedLive(
    "a stream in one write: events of one read become parts in order; ids from the model's own generator",
    () =>
      Effect.gen(function* () {
        const server = yield* Fake.make
        const events = [
          chunk({ role: "assistant", content: "" }),
          chunk({ content: "Reading" }),
          chunk({ content: " both." }),
          chunk({ tool_calls: [toolCall('{"path":"README.md"}', "", 0)] }),
          chunk({ tool_calls: [toolCall("", "call_2", 1)] }),
          chunk({ tool_calls: [{ index: 1, function: { arguments: '{"path":"package.json"}' } }] }),
          chunk({}, "tool_calls"),
          usageChunk({ prompt_tokens: 80, completion_tokens: 30, total_tokens: 110 }),
          DONE
        ]
        server.reply(...[1, 2, 3].map(() => Fake.sse(events, { gapMs: 0 })))
        // the model's layer has its own id generator; a caller's context may hold it, another, or none
        let n = 0
        const own: IdGenerator.Service = { generateId: () => Effect.sync(() => `own-${++n}`) }
        const other: IdGenerator.Service = { generateId: () => Effect.succeed("other") }
        const model = yield* Layer.build(
          modelLayer(SPEC, server, "/v1").pipe(Layer.provide(Layer.succeed(IdGenerator.IdGenerator, own)))
        )
        const run = LanguageModel.streamText({
          prompt: "Read both",
          toolkit: Tools,
          disableToolCallResolution: true
        }).pipe(
          Stream.runCollect,
          Effect.map((c) => ({
            parts: [...c],
            finish: [...c].find((p) => p.type === "finish")
          })),
          Effect.provide(toolsLayer([])),
          Effect.provide(model)
        )
        const results = [
          yield* run,
          yield* run.pipe(Effect.provideService(IdGenerator.IdGenerator, own)),
          yield* run.pipe(Effect.provideService(IdGenerator.IdGenerator, other))
        ]
        const summary = results.map((r) =>
          r.parts.flatMap((p) =>
            p.type === "text-delta"
              ? [p.delta]
              : p.type === "tool-call"
                ? [`${p.id}:${p.name}:${JSON.stringify(p.params)}`]
                : []
          )
        )
        expect(summary).toEqual([
          ["Reading", " both.", 'own-1:read_file:{"path":"README.md"}', 'call_2:read_file:{"path":"package.json"}'],
          ["Reading", " both.", 'own-2:read_file:{"path":"README.md"}', 'call_2:read_file:{"path":"package.json"}'],
          ["Reading", " both.", 'own-3:read_file:{"path":"README.md"}', 'call_2:read_file:{"path":"package.json"}']
        ])
        expect(results.map((r) => r.finish?.reason)).toEqual(["tool-calls", "tool-calls", "tool-calls"])
      })
  )

  it.scopedLive(
    "an error mid-stream in the same read as text: the text before it still comes out, then the error",
    () =>
      Effect.gen(function* () {
        const server = yield* Fake.make
        server.reply(
          Fake.sse(
            [
              chunk({ role: "assistant", content: "" }),
              chunk({ content: "Partial answer" }),
              { data: { error: { message: "the model is overloaded" } } },
              chunk({ content: " never seen" }),
              DONE
            ],
            { gapMs: 0 }
          )
        )
        const seen: Array<string> = []
        const failure = yield* LanguageModel.streamText({ prompt: "Hi", disableToolCallResolution: true }).pipe(
          Stream.runForEach((p) => Effect.sync(() => p.type === "text-delta" && seen.push(p.delta))),
          Effect.flip,
          Effect.provide(modelLayer(SPEC, server, "/v1"))
        )
        expect(seen).toEqual(["Partial answer"])
        expect(failure.message).toContain("the model is overloaded")
      })
  )

  it.scopedLive("streamed tool calls: argument fragments of two parallel calls are assembled", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(
        Fake.sse([
          chunk({ role: "assistant", content: null, tool_calls: [toolCall("", "call_1", 0)] }),
          chunk({ tool_calls: [{ index: 0, function: { arguments: '{"pa' } }] }),
          chunk({ tool_calls: [toolCall("", "call_2", 1)] }),
          chunk({ tool_calls: [{ index: 0, function: { arguments: 'th":"README.md"}' } }] }),
          chunk({ tool_calls: [{ index: 1, function: { arguments: '{"path":"package.json",' } }] }),
          chunk({ tool_calls: [{ index: 1, function: { arguments: '"maxBytes":100}' } }] }),
          chunk({}, "tool_calls"),
          usageChunk({ prompt_tokens: 80, completion_tokens: 30, total_tokens: 110 }),
          DONE
        ]),
        Fake.sse(textStream(["Done."]))
      )
      const calls: Array<unknown> = []
      const { first, second } = yield* streamedToolRoundTrip.pipe(
        Effect.provide(toolsLayer(calls)),
        Effect.provide(modelLayer(SPEC, server, "/v1"))
      )
      expect(calls).toEqual([{ path: "README.md" }, { path: "package.json", maxBytes: 100 }])
      expect(first.filter((p) => p.type === "tool-call").map((p) => (p as any).params)).toEqual([
        { path: "README.md" },
        { path: "package.json", maxBytes: 100 }
      ])
      expect((first.find((p) => p.type === "finish") as any).reason).toBe("tool-calls")
      expect(second.flatMap((p) => (p.type === "text-delta" ? [p.delta] : [])).join("")).toBe("Done.")
      const messages = server.requests[1]!.body.messages
      expect(messages.slice(2)).toEqual([
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "call_1", type: "function", function: { name: "read_file", arguments: '{"path":"README.md"}' } },
            {
              id: "call_2",
              type: "function",
              function: { name: "read_file", arguments: '{"path":"package.json","maxBytes":100}' }
            }
          ]
        },
        { role: "tool", tool_call_id: "call_1", content: '{"content":"# Hello\\n"}' },
        { role: "tool", tool_call_id: "call_2", content: '{"content":"# Hello\\n"}' }
      ])
    })
  )

  it.scopedLive("usage: prompt_tokens_details.cached_tokens and reasoning tokens, whole and streamed", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      const u = {
        prompt_tokens: 1500,
        completion_tokens: 200,
        total_tokens: 1700,
        prompt_tokens_details: { cached_tokens: 1024 },
        completion_tokens_details: { reasoning_tokens: 64 }
      }
      server.reply(Fake.json(200, completion({ content: "hi" }, "stop", u)), Fake.sse(textStream(["hi"], u)))
      const layer = modelLayer("openrouter/openai/gpt-4.1-mini", server, "/api/v1", {
        env: { OPENROUTER_API_KEY: "sk-or-test" }
      })
      const whole = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(Effect.provide(layer))
      const expected = {
        inputTokens: 1500,
        outputTokens: 200,
        totalTokens: 1700,
        cachedInputTokens: 1024,
        reasoningTokens: 64
      }
      expect(usageOf(whole.usage)).toEqual(expected)
      const streamed = yield* streamText().pipe(Effect.provide(layer))
      expect(usageOf(streamed.finish?.usage)).toEqual(expected)
      expect(server.requests[0]!.headers.authorization).toBe("Bearer sk-or-test")
      expect(server.requests[0]!.body.model).toBe("openai/gpt-4.1-mini")
    })
  )

  it.scopedLive("401: a hosted gateway names its key variable; a local server says how to add one", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(
        Fake.json(401, { error: { message: "No auth credentials found", code: 401 } }),
        Fake.json(401, {
          error: { message: "Invalid API Key", type: "invalid_request_error", code: "invalid_api_key" }
        })
      )
      const routed = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(
        Effect.provide(
          modelLayer("openrouter/anthropic/claude-sonnet-4.5", server, "/api/v1", {
            env: { OPENROUTER_API_KEY: "sk-or-bad" }
          })
        ),
        Effect.flip
      )
      expect(messageOf(routed)).toBe(
        "openrouter rejected the API key (401): No auth credentials found. Next step: check OPENROUTER_API_KEY."
      )
      const local = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(
        Effect.provide(modelLayer("vllm/Qwen/Qwen2.5-Coder-7B-Instruct", server, "/v1")),
        Effect.flip
      )
      expect(messageOf(local)).toBe(
        "vllm refused the request as unauthorized (401): Invalid API Key. Next step: set VLLM_API_KEY if the server needs a key."
      )
    })
  )

  it.scopedLive("429 with retry-after: waits (capped), retries, succeeds", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(
        Fake.json(429, { error: { message: "Rate limit exceeded", code: 429 } }, { "retry-after": "2" }),
        Fake.sse(textStream(["ok"]))
      )
      const out = yield* streamText().pipe(Effect.provide(modelLayer(SPEC, server, "/v1")))
      expect(out.text).toBe("ok")
      expect(server.requests.length).toBe(2)
      expect(server.requests[1]!.at - server.requests[0]!.at).toBeGreaterThanOrEqual(280)
    })
  )

  it.scopedLive("500: retried, then a clear error", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      const boom = Fake.json(500, { error: { message: "llama runner process has terminated: exit status 2" } })
      server.reply(boom, boom, boom)
      const error = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(
        Effect.provide(modelLayer(SPEC, server, "/v1")),
        Effect.flip
      )
      expect(server.requests.length).toBe(fast.maxRetries + 1)
      expect(messageOf(error)).toBe(
        "ollama failed with a server error (500) after 2 retries: llama runner process has terminated: exit status 2."
      )
    })
  )

  it.scopedLive("malformed tool-argument JSON, whole and streamed: a clear error, not a crash", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(
        Fake.json(200, completion({ content: null, tool_calls: [toolCall("{'path': 'README.md'}")] }, "tool_calls")),
        Fake.sse([
          chunk({ role: "assistant", tool_calls: [toolCall("", "call_9", 0)] }),
          chunk({ tool_calls: [{ index: 0, function: { arguments: '{"path": "REA' } }] }),
          chunk({}, "tool_calls"),
          DONE
        ])
      )
      const calls: Array<unknown> = []
      const layer = modelLayer(SPEC, server, "/v1")
      const whole = yield* LanguageModel.generateText({ prompt: "read", toolkit: Tools }).pipe(
        Effect.provide(toolsLayer(calls)),
        Effect.provide(layer),
        Effect.flip
      )
      expect(whole._tag).toBe("MalformedOutput")
      expect(messageOf(whole)).toBe(
        `ollama returned malformed JSON arguments for tool 'read_file': "{'path': 'README.md'}"`
      )
      const streamed = yield* LanguageModel.streamText({ prompt: "read", toolkit: Tools }).pipe(
        Stream.runDrain,
        Effect.provide(toolsLayer(calls)),
        Effect.provide(layer),
        Effect.flip
      )
      expect(messageOf(streamed)).toBe(
        `ollama returned malformed JSON arguments for tool 'read_file': "{\\"path\\": \\"REA"`
      )
      expect(calls).toEqual([])
    })
  )

  it.scopedLive("connection dropped mid-stream, or a stream that ends without [DONE]: clear errors", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(
        Fake.sse(textStream(["a", "b", "c"]), { dropAfter: 2 }),
        Fake.sse(textStream(["a", "b", "c"]), { dropAfter: 2 }),
        Fake.sse([chunk({ role: "assistant", content: "" }), chunk({ content: "partial" })]),
        Fake.sse([chunk({ role: "assistant", content: "" }), chunk({ content: "partial" })])
      )
      const layer = modelLayer(SPEC, server, "/v1")
      const dropped = yield* streamText().pipe(Effect.provide(layer), Effect.flip)
      expect(messageOf(dropped)).toBe("the connection to ollama dropped mid-response.")
      const cut = yield* streamText().pipe(Effect.provide(layer), Effect.flip)
      expect(messageOf(cut)).toBe("the connection to ollama closed before the response was complete.")
    })
  )

  it.scopedLive("a body that is not JSON (a proxy's HTML page) is reported as unreadable", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply((_req, res) => {
        res.writeHead(200, { "content-type": "text/html" })
        res.end("<html><body>502 Bad Gateway</body></html>")
      })
      const error = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(
        Effect.provide(modelLayer(SPEC, server, "/v1", { maxRetries: 0 })),
        Effect.flip
      )
      expect(messageOf(error)).toBe(
        `ollama sent a response that could not be read: "<html><body>502 Bad Gateway</body></html>"`
      )
    })
  )

  it.scopedLive("an error object inside the stream is reported, not swallowed", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(
        Fake.sse([
          chunk({ role: "assistant", content: "" }),
          { data: { error: { message: "Provider returned error", code: 502 } } }
        ])
      )
      const error = yield* streamText().pipe(
        Effect.provide(modelLayer("openrouter/x/y", server, "/api/v1", { env: { OPENROUTER_API_KEY: "k" } })),
        Effect.flip
      )
      expect(messageOf(error)).toBe("openrouter reported an error mid-stream: Provider returned error")
    })
  )

  it.scopedLive("a local server that is not running: connection refused at once, with a hint", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      const port = new URL(server.url).port
      // a port nobody listens on: take one and let it go
      const closed = yield* Effect.promise(
        () =>
          new Promise<number>((resolve) => {
            const s = createServer()
            s.listen(0, "127.0.0.1", () => {
              const p = (s.address() as AddressInfo).port
              s.close(() => resolve(p))
            })
          })
      )
      expect(closed).not.toBe(Number(port))
      const started = Date.now()
      const error = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(
        Effect.provide(
          modelLayer(SPEC, { ...server, url: `http://127.0.0.1:${closed}` }, "/v1", {
            maxRetries: 4,
            retryBaseDelay: "1 second"
          })
        ),
        Effect.flip
      )
      expect(Date.now() - started).toBeLessThan(900) // not retried: nothing listens there
      expect(messageOf(error)).toBe(
        `could not connect to ollama at http://127.0.0.1:${closed}/v1: connection refused (is Ollama running?).`
      )
    })
  )

  it.scopedLive("a 200 with an HTML page where a stream was asked for says so, and is not retried", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply((_req, res) => {
        res.writeHead(200, { "content-type": "text/html; charset=utf-8" })
        res.end("<!doctype html><html><head><title>Sign in to Corp VPN</title></head><body>…</body></html>")
      })
      const error = yield* streamText().pipe(Effect.provide(modelLayer(SPEC, server, "/v1")), Effect.flip)
      expect(messageOf(error)).toBe(
        `ollama answered with a page (200, text/html; charset=utf-8) where a stream of events was expected: "Sign in to Corp VPN". Next step: check that ${server.url}/v1 is the address of the API; a proxy or a login page may be answering instead.`
      )
      expect(messageOf(error)).not.toContain("closed before the response was complete")
      expect(server.requests).toHaveLength(1)
    })
  )

  it.scopedLive("a stream cut mid-way is asked for once more; what was passed on is not passed on again", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      const words = ["The ", "fix ", "is ", "in ", "sum.js."]
      server.reply(Fake.sse(textStream(words), { dropAfter: 3 }), Fake.sse(textStream(words)))
      const got = yield* streamText().pipe(Effect.provide(modelLayer(SPEC, server, "/v1")))
      expect(got.deltas).toEqual(words)
      expect(got.text).toBe("The fix is in sum.js.")
      expect(got.finish?.reason).toBe("stop")
      expect(server.requests).toHaveLength(2)
      // a retry that says something else than what was already passed on is not used
      server.reply(Fake.sse(textStream(words), { dropAfter: 3 }), Fake.sse(textStream(["Another ", "answer."])))
      const diverged = yield* streamText().pipe(Effect.provide(modelLayer(SPEC, server, "/v1")), Effect.flip)
      expect(messageOf(diverged)).toBe(
        "the connection to ollama dropped mid-response; asked again, it answered differently from the text already shown, so the reply was not used."
      )
    })
  )

  it.scopedLive("a call to a tool that does not exist names it and the tools there are, not a schema", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      const unknownCall = {
        id: "call_x",
        index: 0,
        type: "function",
        function: { name: "delete_repo", arguments: "{}" }
      }
      server.reply(
        Fake.sse([chunk({ role: "assistant", tool_calls: [unknownCall] }), chunk({}, "tool_calls"), DONE]),
        Fake.json(200, completion({ content: null, tool_calls: [unknownCall] }, "tool_calls"))
      )
      const layer = modelLayer(SPEC, server, "/v1")
      const calls: Array<unknown> = []
      const streamed = yield* LanguageModel.streamText({
        prompt: "go",
        toolkit: Tools,
        disableToolCallResolution: true
      }).pipe(Stream.runDrain, Effect.provide(toolsLayer(calls)), Effect.provide(layer), Effect.flip)
      const expected = `ollama/llama3.2 called a tool that does not exist: "delete_repo". The tools it has: read_file.`
      expect(messageOf(streamed)).toBe(expected)
      const whole = yield* LanguageModel.generateText({
        prompt: "go",
        toolkit: Tools,
        disableToolCallResolution: true
      }).pipe(Effect.provide(toolsLayer(calls)), Effect.provide(layer), Effect.flip)
      expect(messageOf(whole)).toBe(expected)
      expect(messageOf(whole)).not.toContain("Chunk<")
      expect(calls).toEqual([])
    })
  )

  it.scopedLive("each retry is told before its wait: how long, and why", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(
        Fake.json(429, { error: { message: "slow down" } }, { "retry-after": "0.05" }),
        Fake.json(503, { error: { message: "busy" } }),
        Fake.sse(textStream(["ok"]))
      )
      const retries: Array<{ attempt: number; delayMs: number; reason: string; status?: number | undefined }> = []
      const got = yield* streamText().pipe(
        Effect.provide(
          modelLayer(SPEC, server, "/v1", {
            onRetry: (r) => Effect.sync(() => void retries.push(r))
          })
        )
      )
      expect(got.text).toBe("ok")
      expect(retries.map((r) => [r.attempt, r.reason, r.status])).toEqual([
        [1, "rate limited (429)", 429],
        [2, "overloaded (503)", 503]
      ])
      expect(retries[0]!.delayMs).toBe(50)
    })
  )
})
