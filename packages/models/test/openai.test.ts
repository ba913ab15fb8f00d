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

// Wire format: OpenAI Responses API (POST /v1/responses), as documented at
// https://platform.openai.com/docs/api-reference/responses

const usage = (input = 36, output = 87, cached = 0, reasoning = 0) => ({
  input_tokens: input,
  input_tokens_details: { cached_tokens: cached },
  output_tokens: output,
  output_tokens_details: { reasoning_tokens: reasoning },
  total_tokens: input + output
})

const response = (output: Array<unknown>, u: unknown = usage(), status = "completed") => ({
  id: "resp_67ccd2bed1ec8190b14f964abc054267",
  object: "response",
  created_at: 1741476542,
  status,
  error: null,
  incomplete_details: null,
  instructions: null,
  max_output_tokens: null,
  model: "gpt-4.1-mini-2025-04-14",
  output,
  parallel_tool_calls: true,
  previous_response_id: null,
  reasoning: { effort: null, summary: null },
  store: true,
  temperature: 1.0,
  text: { format: { type: "text" } },
  tool_choice: "auto",
  tools: [],
  top_p: 1.0,
  truncation: "disabled",
  usage: u,
  user: null,
  metadata: {}
})

const message = (text: string, id = "msg_1") => ({
  type: "message",
  id,
  status: "completed",
  role: "assistant",
  content: [{ type: "output_text", text, annotations: [] }]
})

const functionCall = (args: string) => ({
  type: "function_call",
  id: "fc_1",
  call_id: "call_1",
  name: "read_file",
  arguments: args,
  status: "completed"
})

/** The SSE events of a streamed text response. */
const textEvents = (words: Array<string>, u: unknown = usage()) => {
  let seq = 0
  const ev = (type: string, data: Record<string, unknown>) => ({
    event: type,
    data: { type, sequence_number: seq++, ...data }
  })
  const text = words.join("")
  return [
    ev("response.created", { response: response([], null, "in_progress") }),
    ev("response.in_progress", { response: response([], null, "in_progress") }),
    ev("response.output_item.added", {
      output_index: 0,
      item: { id: "msg_1", type: "message", status: "in_progress", role: "assistant", content: [] }
    }),
    ev("response.content_part.added", {
      item_id: "msg_1",
      output_index: 0,
      content_index: 0,
      part: { type: "output_text", text: "", annotations: [] }
    }),
    ...words.map((w) =>
      ev("response.output_text.delta", { item_id: "msg_1", output_index: 0, content_index: 0, delta: w, logprobs: [] })
    ),
    ev("response.output_text.done", { item_id: "msg_1", output_index: 0, content_index: 0, text, logprobs: [] }),
    ev("response.content_part.done", {
      item_id: "msg_1",
      output_index: 0,
      content_index: 0,
      part: { type: "output_text", text, annotations: [] }
    }),
    ev("response.output_item.done", { output_index: 0, item: message(text) }),
    ev("response.completed", { response: response([message(text)], u) })
  ]
}

/** The SSE events of a streamed function call whose arguments arrive in fragments. */
const toolEvents = (fragments: Array<string>) => {
  let seq = 0
  const ev = (type: string, data: Record<string, unknown>) => ({
    event: type,
    data: { type, sequence_number: seq++, ...data }
  })
  const args = fragments.join("")
  return [
    ev("response.created", { response: response([], null, "in_progress") }),
    ev("response.output_item.added", {
      output_index: 0,
      item: {
        type: "function_call",
        id: "fc_1",
        call_id: "call_1",
        name: "read_file",
        arguments: "",
        status: "in_progress"
      }
    }),
    ...fragments.map((f) =>
      ev("response.function_call_arguments.delta", { item_id: "fc_1", output_index: 0, delta: f })
    ),
    ev("response.function_call_arguments.done", { item_id: "fc_1", output_index: 0, arguments: args }),
    ev("response.output_item.done", { output_index: 0, item: functionCall(args) }),
    ev("response.completed", { response: response([functionCall(args)]) })
  ]
}

const unauthorized = {
  error: {
    message:
      "Incorrect API key provided: sk-test-*****nai. You can find your API key at https://platform.openai.com/account/api-keys.",
    type: "invalid_request_error",
    param: null,
    code: "invalid_api_key"
  }
}

describe("openai (Responses API)", () => {
  it.scopedLive("tool call round trip: handler runs, result goes back as function_call_output", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(
        Fake.json(200, response([functionCall('{"path":"README.md"}')])),
        Fake.json(200, response([message("README says hello.")]))
      )
      const calls: Array<unknown> = []
      const { first, second } = yield* toolRoundTrip.pipe(
        Effect.provide(toolsLayer(calls)),
        Effect.provide(modelLayer("openai/gpt-4.1-mini", server, "/v1"))
      )
      expect(calls).toEqual([{ path: "README.md" }])
      expect(first.toolResults.map((r) => [r.name, r.result])).toEqual([["read_file", { content: "# Hello\n" }]])
      expect(second.text).toBe("README says hello.")

      const [req1, req2] = server.requests
      expect(req1!.method).toBe("POST")
      expect(req1!.url).toBe("/v1/responses")
      expect(req1!.headers.authorization).toBe("Bearer sk-test-openai")
      expect(req1!.body.model).toBe("gpt-4.1-mini")
      expect(req1!.body.tools).toEqual([
        {
          type: "function",
          name: "read_file",
          description: "Read a file from the workspace",
          parameters: {
            type: "object",
            required: ["path"],
            properties: { path: { type: "string" }, maxBytes: { type: "number" } },
            additionalProperties: false
          },
          // maxBytes is optional, so strict mode would be rejected by OpenAI
          strict: false
        }
      ])
      expect(req2!.body.input).toEqual([
        { role: "system", content: "You are a test." },
        { role: "user", content: [{ type: "input_text", text: "Read README.md" }] },
        { type: "function_call", call_id: "call_1", name: "read_file", arguments: '{"path":"README.md"}' },
        { type: "function_call_output", call_id: "call_1", output: '{"content":"# Hello\\n"}' }
      ])
    })
  )

  it.scopedLive("streams text deltas, ending with a finish part", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(Fake.sse(textEvents(["Hel", "lo, ", "world"])))
      const out = yield* streamText().pipe(Effect.provide(modelLayer("openai/gpt-4.1-mini", server, "/v1")))
      expect(out.deltas).toEqual(["Hel", "lo, ", "world"])
      expect(out.finish?.reason).toBe("stop")
      expect(server.requests[0]!.body.stream).toBe(true)
    })
  )

  it.scopedLive("streamed tool call: argument fragments are assembled and the handler runs", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(Fake.sse(toolEvents(['{"pa', 'th":"REA', 'DME.md"}'])), Fake.sse(textEvents(["Done."])))
      const calls: Array<unknown> = []
      const { first, second } = yield* streamedToolRoundTrip.pipe(
        Effect.provide(toolsLayer(calls)),
        Effect.provide(modelLayer("openai/gpt-4.1-mini", server, "/v1"))
      )
      expect(calls).toEqual([{ path: "README.md" }])
      expect(first.filter((p) => p.type === "tool-params-delta").length).toBe(3)
      expect(second.flatMap((p) => (p.type === "text-delta" ? [p.delta] : [])).join("")).toBe("Done.")
      expect(server.requests[1]!.body.input.at(-1)).toEqual({
        type: "function_call_output",
        call_id: "call_1",
        output: '{"content":"# Hello\\n"}'
      })
    })
  )

  it.scopedLive("usage: input, output, cached and reasoning tokens", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(
        Fake.json(200, response([message("hi")], usage(2000, 300, 1536, 128))),
        Fake.sse(textEvents(["hi"], usage(1200, 40, 1024, 16)))
      )
      const layer = modelLayer("openai/gpt-4.1-mini", server, "/v1")
      const whole = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(Effect.provide(layer))
      expect(usageOf(whole.usage)).toEqual({
        inputTokens: 2000,
        outputTokens: 300,
        totalTokens: 2300,
        cachedInputTokens: 1536,
        reasoningTokens: 128
      })
      const streamed = yield* streamText().pipe(Effect.provide(layer))
      expect(usageOf(streamed.finish?.usage)).toEqual({
        inputTokens: 1200,
        outputTokens: 40,
        totalTokens: 1240,
        cachedInputTokens: 1024,
        reasoningTokens: 16
      })
    })
  )

  it.scopedLive("401: the message names the provider, the status and the variable", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(Fake.json(401, unauthorized))
      const error = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(
        Effect.provide(modelLayer("openai/gpt-4.1-mini", server, "/v1")),
        Effect.flip
      )
      expect(error._tag).toBe("HttpResponseError")
      expect(messageOf(error)).toBe(
        "openai rejected the API key (401): Incorrect API key provided: sk-test-*****nai. You can find your API key at https://platform.openai.com/account/api-keys. Next step: check OPENAI_API_KEY."
      )
      expect(server.requests.length).toBe(1) // 401 is not retried
    })
  )

  it.scopedLive("429 with retry-after: waits (capped), retries, succeeds", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(
        Fake.json(
          429,
          { error: { message: "Rate limit reached", type: "requests", code: "rate_limit_exceeded" } },
          {
            "retry-after": "1"
          }
        ),
        Fake.json(200, response([message("after the wait")]))
      )
      const res = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(
        Effect.provide(modelLayer("openai/gpt-4.1-mini", server, "/v1"))
      )
      expect(res.text).toBe("after the wait")
      expect(server.requests.length).toBe(2)
      const waited = server.requests[1]!.at - server.requests[0]!.at
      // retry-after: 1 s, capped by retryMaxDelay (300 ms); the plain backoff would be ~5 ms
      expect(waited).toBeGreaterThanOrEqual(280)
      expect(waited).toBeLessThan(1000)
    })
  )

  it.scopedLive("500: retried, then a clear error", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      const boom = Fake.json(500, {
        error: { message: "The server had an error while processing your request.", type: "server_error" }
      })
      server.reply(boom, boom, boom)
      const error = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(
        Effect.provide(modelLayer("openai/gpt-4.1-mini", server, "/v1")),
        Effect.flip
      )
      expect(server.requests.length).toBe(fast.maxRetries + 1)
      expect(messageOf(error)).toBe(
        "openai failed with a server error (500) after 2 retries: The server had an error while processing your request."
      )
    })
  )

  it.scopedLive("malformed tool-argument JSON from the model: a clear error, not a crash", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(Fake.json(200, response([functionCall('{"path": "README.md"')])))
      const calls: Array<unknown> = []
      const error = yield* LanguageModel.generateText({ prompt: "read it", toolkit: Tools }).pipe(
        Effect.provide(toolsLayer(calls)),
        Effect.provide(modelLayer("openai/gpt-4.1-mini", server, "/v1")),
        Effect.flip
      )
      expect(error._tag).toBe("MalformedOutput")
      expect(messageOf(error)).toBe(
        `openai returned malformed JSON arguments for tool 'read_file': "{\\"path\\": \\"README.md\\""`
      )
      expect(calls).toEqual([])
    })
  )

  it.scopedLive("a whole response that is not a response: a clear error", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(Fake.json(200, { unexpected: true }))
      const error = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(
        Effect.provide(modelLayer("openai/gpt-4.1-mini", server, "/v1")),
        Effect.flip
      )
      expect(error._tag).toBe("MalformedOutput")
      expect(messageOf(error)).toBe(`openai sent a response without 'output': {"unexpected":true}`)
    })
  )

  it.scopedLive("connection dropped mid-stream: a clear error", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(
        Fake.sse(textEvents(["Hel", "lo", " wor", "ld"]), { dropAfter: 6 }),
        Fake.sse(textEvents(["Hel", "lo", " wor", "ld"]))
      )
      const once = yield* streamText().pipe(Effect.provide(modelLayer("openai/gpt-4.1-mini", server, "/v1")))
      expect(once.deltas).toEqual(["Hel", "lo", " wor", "ld"])
      server.reply(
        Fake.sse(textEvents(["Hel", "lo", " wor", "ld"]), { dropAfter: 5 }),
        Fake.sse(textEvents(["Hel", "lo", " wor", "ld"]), { dropAfter: 5 })
      )
      const error = yield* streamText().pipe(
        Effect.provide(modelLayer("openai/gpt-4.1-mini", server, "/v1")),
        Effect.flip
      )
      expect(messageOf(error)).toBe("the connection to openai dropped mid-response.")
    })
  )

  it.scopedLive("streams can be consumed incrementally", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      server.reply(Fake.sse(textEvents(["a", "b", "c"])))
      const first = yield* LanguageModel.streamText({ prompt: "x" }).pipe(
        Stream.filter((p) => p.type === "text-delta"),
        Stream.take(1),
        Stream.runCollect,
        Effect.provide(modelLayer("openai/gpt-4.1-mini", server, "/v1"))
      )
      expect([...first].map((p) => (p as { delta: string }).delta)).toEqual(["a"])
    })
  )
})
