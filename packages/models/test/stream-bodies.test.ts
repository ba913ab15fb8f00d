import { LanguageModel, Prompt } from "@effect/ai"
import * as AnthropicClient from "@effect/ai-anthropic/AnthropicClient"
import * as AnthropicLanguageModel from "@effect/ai-anthropic/AnthropicLanguageModel"
import * as OpenAiClient from "@effect/ai-openai/OpenAiClient"
import * as OpenAiLanguageModel from "@effect/ai-openai/OpenAiLanguageModel"
import { FetchHttpClient } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Redacted, Stream } from "effect"
import * as Fake from "./support/FakeServer.js"
import { env, modelLayer, Tools, toolsLayer } from "./support/harness.js"

// The Anthropic and Responses streaming requests go out as text made by one JSON.stringify: the
// bytes must be those the provider client itself would send (with the strict-mode fix applied to
// the request object, for Responses).

const history = Prompt.make([
  { role: "system", content: "You are a test." },
  { role: "user", content: [{ type: "text", text: 'Read "README.md" \u2028 \\ ünïcode 😀' }] },
  {
    role: "assistant",
    content: [
      { type: "text", text: "Reading." },
      { type: "tool-call", id: "call_1", name: "read_file", params: { path: "README.md" }, providerExecuted: false }
    ]
  },
  {
    role: "tool",
    content: [
      {
        type: "tool-result",
        id: "call_1",
        name: "read_file",
        result: { content: '# Hi\n\u0000 "q"' },
        isFailure: false,
        providerExecuted: false
      }
    ]
  }
])

/** Sends one streaming request with the history and the tools; the reply does not matter. */
const send = (layer: Layer.Layer<LanguageModel.LanguageModel, unknown>) =>
  LanguageModel.streamText({ prompt: history, toolkit: Tools }).pipe(
    Stream.runDrain,
    Effect.either,
    Effect.provide(Layer.merge(layer, toolsLayer([]))),
    Effect.asVoid
  )

describe("streaming request bodies", () => {
  it.scopedLive("Responses: the client's own bytes, tools strict only where their schema allows", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(Fake.text(400, "no"), Fake.text(400, "no"))
      yield* send(modelLayer("openai/gpt-4.1-mini", server, "/v1", { maxRetries: 0 }))
      const ours = server.requests[0]!
      const config = { ...ours.body }
      for (const key of ["model", "input", "include", "text", "tools", "tool_choice", "stream"]) delete config[key]
      const stock = OpenAiLanguageModel.layer({ model: "gpt-4.1-mini", config }).pipe(
        Layer.provide(OpenAiClient.layer({ apiKey: Redacted.make(env.OPENAI_API_KEY), apiUrl: `${server.url}/v1` })),
        Layer.provide(FetchHttpClient.layer)
      )
      yield* send(stock as any)
      const theirs = server.requests[1]!
      expect(ours.headers["content-type"]).toBe("application/json")
      // the stock client sends read_file (an optional parameter) with strict: true, which OpenAI rejects
      expect(theirs.body.tools[0].strict).toBe(true)
      expect(ours.body.tools[0].strict).toBe(false)
      const fixed = JSON.parse(theirs.raw)
      fixed.tools[0].strict = false
      expect(ours.raw).toBe(JSON.stringify(fixed))
      expect(ours.body.input.at(-1)).toEqual({
        type: "function_call_output",
        call_id: "call_1",
        output: JSON.stringify({ content: '# Hi\n\u0000 "q"' })
      })
    })
  )

  it.scopedLive("Anthropic Messages: the client's own bytes", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(Fake.text(400, "no"), Fake.text(400, "no"))
      yield* send(modelLayer("anthropic/claude-sonnet-4-5", server, "", { maxRetries: 0 }))
      const ours = server.requests[0]!
      const stock = AnthropicLanguageModel.layer({
        model: "claude-sonnet-4-5",
        config: { max_tokens: ours.body.max_tokens }
      }).pipe(
        Layer.provide(AnthropicClient.layer({ apiKey: Redacted.make(env.ANTHROPIC_API_KEY), apiUrl: server.url })),
        Layer.provide(FetchHttpClient.layer)
      )
      yield* send(stock as any)
      const theirs = server.requests[1]!
      expect(ours.headers["content-type"]).toBe("application/json")
      expect(ours.body.stream).toBe(true)
      expect(ours.raw).toBe(theirs.raw)
    })
  )
})
