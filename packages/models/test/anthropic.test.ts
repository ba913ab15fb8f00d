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

// Wire format: Anthropic Messages API (POST /v1/messages), as documented at
// https://docs.anthropic.com/en/api/messages and https://docs.anthropic.com/en/docs/build-with-claude/streaming

const MODEL = "claude-sonnet-4-5-20250929"

const usage = (input = 25, output = 12, cacheRead = 0, cacheWrite = 0) => ({
  input_tokens: input,
  output_tokens: output,
  cache_creation_input_tokens: cacheWrite,
  cache_read_input_tokens: cacheRead
})

const message = (content: Array<unknown>, stop_reason: string, u: unknown = usage()) => ({
  id: "msg_01XFDUDYJgAACzvnptvVoYEL",
  type: "message",
  role: "assistant",
  model: MODEL,
  content,
  stop_reason,
  stop_sequence: null,
  usage: u
})

const toolUse = {
  type: "tool_use",
  id: "toolu_01A09q90qw90lq917835lq9",
  name: "read_file",
  input: { path: "README.md" }
}

const messageStart = (u = usage(25, 1)) => ({
  event: "message_start",
  data: {
    type: "message_start",
    message: {
      id: "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY",
      type: "message",
      role: "assistant",
      content: [],
      model: MODEL,
      stop_reason: null,
      stop_sequence: null,
      usage: u
    }
  }
})

const textEvents = (words: Array<string>, start = messageStart(), outputTokens = 15) => [
  start,
  {
    event: "content_block_start",
    data: { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }
  },
  { event: "ping", data: { type: "ping" } },
  ...words.map((w) => ({
    event: "content_block_delta",
    data: { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: w } }
  })),
  { event: "content_block_stop", data: { type: "content_block_stop", index: 0 } },
  {
    event: "message_delta",
    data: {
      type: "message_delta",
      delta: { stop_reason: "end_turn", stop_sequence: null },
      usage: { output_tokens: outputTokens }
    }
  },
  { event: "message_stop", data: { type: "message_stop" } }
]

const toolEvents = (fragments: Array<string>) => [
  messageStart(),
  {
    event: "content_block_start",
    data: {
      type: "content_block_start",
      index: 0,
      content_block: { type: "tool_use", id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", name: "read_file", input: {} }
    }
  },
  ...fragments.map((f) => ({
    event: "content_block_delta",
    data: { type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: f } }
  })),
  { event: "content_block_stop", data: { type: "content_block_stop", index: 0 } },
  {
    event: "message_delta",
    data: {
      type: "message_delta",
      delta: { stop_reason: "tool_use", stop_sequence: null },
      usage: { output_tokens: 89 }
    }
  },
  { event: "message_stop", data: { type: "message_stop" } }
]

const apiError = (type: string, message: string) => ({ type: "error", error: { type, message } })

describe("anthropic (Messages API)", () => {
  it.scopedLive("tool call round trip: handler runs, result goes back as a tool_result block", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(
        Fake.json(200, message([{ type: "text", text: "Let me read it." }, toolUse], "tool_use")),
        Fake.json(200, message([{ type: "text", text: "README says hello." }], "end_turn"))
      )
      const calls: Array<unknown> = []
      const { first, second } = yield* toolRoundTrip.pipe(
        Effect.provide(toolsLayer(calls)),
        Effect.provide(modelLayer("anthropic/claude-sonnet-4-5", server))
      )
      expect(calls).toEqual([{ path: "README.md" }])
      expect(first.finishReason).toBe("tool-calls")
      expect(second.text).toBe("README says hello.")

      const [req1, req2] = server.requests
      expect(req1!.url.startsWith("/v1/messages")).toBe(true)
      expect(req1!.headers["x-api-key"]).toBe("sk-ant-test")
      expect(req1!.headers["anthropic-version"]).toBe("2023-06-01")
      expect(req1!.body.model).toBe("claude-sonnet-4-5")
      expect(req1!.body.max_tokens).toBe(16_384)
      expect(req1!.body.system).toEqual([{ type: "text", text: "You are a test." }])
      expect(req1!.body.tools).toEqual([
        {
          name: "read_file",
          description: "Read a file from the workspace",
          input_schema: {
            type: "object",
            required: ["path"],
            properties: { path: { type: "string" }, maxBytes: { type: "number" } },
            additionalProperties: false
          }
        }
      ])
      expect(req2!.body.messages).toEqual([
        { role: "user", content: [{ type: "text", text: "Read README.md" }] },
        {
          role: "assistant",
          content: [
            { type: "text", text: "Let me read it." },
            { type: "tool_use", id: "toolu_01A09q90qw90lq917835lq9", name: "read_file", input: { path: "README.md" } }
          ]
        },
        {
          role: "user",
          content: [
            {
              type: "tool_result",
              tool_use_id: "toolu_01A09q90qw90lq917835lq9",
              content: '{"content":"# Hello\\n"}',
              is_error: false
            }
          ]
        }
      ])
    })
  )

  it.scopedLive("streams text deltas from content_block_delta events", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(Fake.sse(textEvents(["Hello", "!", " How can I help?"])))
      const out = yield* streamText().pipe(Effect.provide(modelLayer("anthropic/claude-sonnet-4-5", server)))
      expect(out.text).toBe("Hello! How can I help?")
      expect(out.finish?.reason).toBe("stop")
      expect(server.requests[0]!.body.stream).toBe(true)
    })
  )

  it.scopedLive("streamed tool call: input_json_delta fragments are assembled and the handler runs", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(Fake.sse(toolEvents(['{"path": "RE', "ADME", '.md"}'])), Fake.sse(textEvents(["Done."])))
      const calls: Array<unknown> = []
      const { second } = yield* streamedToolRoundTrip.pipe(
        Effect.provide(toolsLayer(calls)),
        Effect.provide(modelLayer("anthropic/claude-sonnet-4-5", server))
      )
      expect(calls).toEqual([{ path: "README.md" }])
      expect(second.flatMap((p) => (p.type === "text-delta" ? [p.delta] : [])).join("")).toBe("Done.")
      expect(server.requests[1]!.body.messages.at(-1).content[0]).toMatchObject({
        type: "tool_result",
        tool_use_id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6"
      })
    })
  )

  it.scopedLive("usage: cache reads and writes count as input; cached = cache reads", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(
        Fake.json(200, message([{ type: "text", text: "hi" }], "end_turn", usage(100, 50, 1500, 200))),
        Fake.sse(textEvents(["hi"], messageStart(usage(10, 1, 3000, 0)), 7))
      )
      const layer = modelLayer("anthropic/claude-sonnet-4-5", server)
      const whole = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(Effect.provide(layer))
      expect(usageOf(whole.usage)).toEqual({
        inputTokens: 1800,
        outputTokens: 50,
        totalTokens: 1850,
        cachedInputTokens: 1500,
        reasoningTokens: 0
      })
      const streamed = yield* streamText().pipe(Effect.provide(layer))
      expect(usageOf(streamed.finish?.usage)).toEqual({
        inputTokens: 3010,
        outputTokens: 7,
        totalTokens: 3017,
        cachedInputTokens: 3000,
        reasoningTokens: 0
      })
    })
  )

  it.scopedLive("401: the message names the provider, the status and the variable", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(Fake.json(401, apiError("authentication_error", "invalid x-api-key")))
      const error = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(
        Effect.provide(modelLayer("anthropic/claude-sonnet-4-5", server)),
        Effect.flip
      )
      expect(messageOf(error)).toBe(
        "anthropic rejected the API key (401): invalid x-api-key. Next step: check ANTHROPIC_API_KEY."
      )
      expect(server.requests.length).toBe(1)
    })
  )

  it.scopedLive("429 with retry-after as an HTTP date: waits (capped), retries, succeeds", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(
        Fake.json(
          429,
          apiError("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
          {
            "retry-after": new Date(Date.now() + 5000).toUTCString()
          }
        ),
        Fake.json(200, message([{ type: "text", text: "after the wait" }], "end_turn"))
      )
      const res = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(
        Effect.provide(modelLayer("anthropic/claude-sonnet-4-5", server))
      )
      expect(res.text).toBe("after the wait")
      expect(server.requests.length).toBe(2)
      const waited = server.requests[1]!.at - server.requests[0]!.at
      expect(waited).toBeGreaterThanOrEqual(280)
      expect(waited).toBeLessThan(1500)
    })
  )

  it.scopedLive("500: retried, then a clear error; 529 says overloaded", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      const boom = Fake.json(500, apiError("api_error", "Internal server error"))
      server.reply(boom, boom, boom)
      const layer = modelLayer("anthropic/claude-sonnet-4-5", server)
      const error = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(Effect.provide(layer), Effect.flip)
      expect(server.requests.length).toBe(fast.maxRetries + 1)
      expect(messageOf(error)).toBe(
        "anthropic failed with a server error (500) after 2 retries: Internal server error."
      )

      const overloaded = Fake.json(529, apiError("overloaded_error", "Overloaded"))
      server.reply(overloaded, overloaded, overloaded)
      const error2 = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(Effect.provide(layer), Effect.flip)
      expect(messageOf(error2)).toBe("anthropic is overloaded (529) and still was after 2 retries: Overloaded.")
    })
  )

  it.scopedLive("malformed tool-argument JSON in a stream: a clear error, not a crash", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(Fake.sse(toolEvents(['{"path": "READ', "ME.md"])))
      const calls: Array<unknown> = []
      const error = yield* LanguageModel.streamText({ prompt: "read it", toolkit: Tools }).pipe(
        Stream.runDrain,
        Effect.provide(toolsLayer(calls)),
        Effect.provide(modelLayer("anthropic/claude-sonnet-4-5", server)),
        Effect.flip
      )
      expect(messageOf(error)).toBe(
        `anthropic returned malformed JSON arguments for tool 'read_file': "{\\"path\\": \\"README.md"`
      )
      expect(calls).toEqual([])
    })
  )

  it.scopedLive("connection dropped mid-stream: a clear error", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      // cut once: asked again, the text goes on where it stopped, nothing repeated
      server.reply(
        Fake.sse(textEvents(["Hel", "lo", " there"]), { dropAfter: 4 }),
        Fake.sse(textEvents(["Hel", "lo", " there"]))
      )
      const once = yield* streamText().pipe(Effect.provide(modelLayer("anthropic/claude-sonnet-4-5", server)))
      expect(once.deltas).toEqual(["Hel", "lo", " there"])
      expect(once.finish).toBeDefined()
      expect(server.requests).toHaveLength(2)
      // cut twice: a clear error
      server.reply(
        Fake.sse(textEvents(["Hel", "lo", " there"]), { dropAfter: 4 }),
        Fake.sse(textEvents(["Hel", "lo", " there"]), { dropAfter: 4 })
      )
      const error = yield* streamText().pipe(
        Effect.provide(modelLayer("anthropic/claude-sonnet-4-5", server)),
        Effect.flip
      )
      expect(messageOf(error)).toBe("the connection to anthropic dropped mid-response.")
    })
  )
})
