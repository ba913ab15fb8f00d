import { IdGenerator, LanguageModel, Prompt, Tool, Toolkit } from "@effect/ai"
import * as OpenAiLanguageModel from "@effect/ai-openai/OpenAiLanguageModel"
import * as OpenAiTool from "@effect/ai-openai/OpenAiTool"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Layer, Schema, Stream } from "effect"
import { Models } from "../src/index.js"
import * as Fake from "./support/FakeServer.js"
import { env, fast, ReadFile } from "./support/harness.js"
import { legacyLayer } from "./support/legacyOpenAi.js"
import * as Wire from "./support/wire.js"

// The Responses API spoken by MuseKit itself against the same calls made through @effect/ai-openai's
// language model (as MuseKit used it before): the request bodies must be the same bytes (prompt
// caches and recorded logs depend on them), and the parts read from the same responses the same.

const ListDir = Tool.make("list_dir", {
  description: "List a directory",
  parameters: { path: Schema.String, depth: Schema.Number }
})
const Plain = Tool.make("now")
const Tools = Toolkit.make(ReadFile, ListDir, Plain)

const png = new Uint8Array([137, 80, 78, 71, 13, 10, 26, 10, 0, 255, 128])
const pdf = new Uint8Array([37, 80, 68, 70, 45, 49, 46, 55])

/** Prompts with every kind of message and part the Responses API takes. */
const corpus: Record<string, Prompt.Prompt> = {
  plain: Prompt.make([
    { role: "system", content: "You are a test." },
    { role: "user", content: [{ type: "text", text: "Say hi" }] }
  ]),
  "tool round trip, unicode, a failure": Prompt.make([
    { role: "system", content: "You are a test." },
    { role: "user", content: [{ type: "text", text: 'Read "README.md" \u2028 \\ ünïcode 😀' }] },
    {
      role: "assistant",
      content: [
        { type: "text", text: "Reading." },
        { type: "tool-call", id: "call_1", name: "read_file", params: { path: "README.md" }, providerExecuted: false },
        { type: "tool-call", id: "call_2", name: "list_dir", params: { path: ".", depth: 1 }, providerExecuted: false },
        { type: "tool-call", id: "ws_1", name: "OpenAiWebSearch", params: {}, providerExecuted: true },
        {
          type: "tool-result",
          id: "ws_1",
          name: "OpenAiWebSearch",
          result: { status: "completed" },
          isFailure: false,
          providerExecuted: true
        }
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
        },
        {
          type: "tool-result",
          id: "call_2",
          name: "list_dir",
          result: { message: "no such directory" },
          isFailure: true,
          providerExecuted: false
        }
      ]
    },
    {
      role: "user",
      content: [
        { type: "text", text: "Go on." },
        { type: "text", text: "Second part." }
      ]
    }
  ]),
  "reasoning items and item ids": Prompt.make([
    { role: "system", content: "Think." },
    { role: "user", content: [{ type: "text", text: "Why?" }] },
    {
      role: "assistant",
      content: [
        {
          type: "reasoning",
          text: "First thought.",
          options: { openai: { itemId: "rs_1", encryptedContent: "gAAA==" } }
        },
        {
          type: "reasoning",
          text: "Second thought.",
          options: { openai: { itemId: "rs_1", encryptedContent: "gAAA==" } }
        },
        { type: "reasoning", text: "", options: { openai: { itemId: "rs_2" } } },
        { type: "reasoning", text: "no item id: not sent" },
        { type: "text", text: "Because.", options: { openai: { itemId: "msg_1" } } },
        {
          type: "tool-call",
          id: "call_9",
          name: "now",
          params: {},
          providerExecuted: false,
          options: { openai: { itemId: "fc_9" } }
        }
      ]
    },
    {
      role: "tool",
      content: [
        { type: "tool-result", id: "call_9", name: "now", result: "noon", isFailure: false, providerExecuted: false }
      ]
    }
  ]),
  "images and files": Prompt.make([
    {
      role: "user",
      content: [
        { type: "text", text: "Look:" },
        { type: "file", mediaType: "image/png", data: png },
        { type: "file", mediaType: "image/*", data: png, options: { openai: { imageDetail: "low" } } },
        { type: "file", mediaType: "image/jpeg", data: new URL("https://example.com/cat.jpg") },
        { type: "file", mediaType: "image/png", data: "file-abc123", options: { openai: { imageDetail: "high" } } },
        { type: "file", mediaType: "image/png", data: "not-a-file-id" },
        { type: "file", mediaType: "application/pdf", data: pdf },
        { type: "file", mediaType: "application/pdf", data: pdf, fileName: "report.pdf" },
        { type: "file", mediaType: "application/pdf", data: new URL("https://example.com/a.pdf") },
        { type: "file", mediaType: "application/pdf", data: "file-pdf42" }
      ]
    }
  ])
}

interface Call {
  readonly toolkit?: boolean
  readonly toolChoice?: unknown
  readonly object?: boolean
  readonly webSearch?: boolean
}

const calls: Record<string, Call> = {
  "no tools": {},
  "tools, auto": { toolkit: true },
  "tools, none": { toolkit: true, toolChoice: "none" },
  "tools, required": { toolkit: true, toolChoice: "required" },
  "tools, one named": { toolkit: true, toolChoice: { tool: "list_dir" } },
  "tools, one of": { toolkit: true, toolChoice: { oneOf: ["read_file", "now"], mode: "required" } },
  "tools, one of none": { toolkit: true, toolChoice: { oneOf: [] } },
  "provider tool": { webSearch: true, toolChoice: { tool: "web_search" } },
  "JSON object": { object: true }
}

const configs: Record<string, { readonly model: string; readonly options: Models.Options }> = {
  default: { model: "gpt-4.1-mini", options: {} },
  "cache key, max output tokens": {
    model: "gpt-4.1-mini",
    options: { config: { prompt_cache_key: "muse-s1" }, maxOutputTokens: 2048 }
  },
  "reasoning model, encrypted reasoning, no store": {
    model: "gpt-5",
    options: {
      config: {
        reasoning: { effort: "low", summary: "auto" },
        include: ["reasoning.encrypted_content"],
        store: false,
        text: { verbosity: "low" }
      }
    }
  },
  "strict off": { model: "o4-mini", options: { config: { strict: false, temperature: 0.2 } } },
  "strict on (as set)": { model: "gpt-4.1", options: { config: { strict: true, previous_response_id: "resp_0" } } },
  "file ids, a stream field": {
    model: "gpt-4.1",
    options: { config: { fileIdPrefixes: ["file-"], stream: false, parallel_tool_calls: false } }
  }
}

const WebTools = Toolkit.make(ReadFile, OpenAiTool.WebSearch({ search_context_size: "low" }))
const Answer = Schema.Struct({ answer: Schema.String, note: Schema.optional(Schema.String) }).annotations({
  description: "The answer"
})

/** An effect with the toolkits' handlers left out of its type (no tool call is resolved in these tests). */
const noHandlers = <A, E>(effect: Effect.Effect<A, E, any>) => effect as Effect.Effect<A, E>

/** The model with ids counted from 0 (the ids of sources), so that two runs can be compared. */
const withIds = (layer: Layer.Layer<LanguageModel.LanguageModel>) => {
  let n = 0
  return Layer.provide(
    layer,
    Layer.succeed(IdGenerator.IdGenerator, { generateId: () => Effect.sync(() => `id-${n++}`) })
  )
}

/** Makes one call (streamed or not); the server's answer (an error) does not matter. */
const send = (layer: Layer.Layer<LanguageModel.LanguageModel>, prompt: Prompt.Prompt, call: Call, stream: boolean) => {
  const options: any = {
    prompt,
    ...(call.toolkit ? { toolkit: Tools } : {}),
    ...(call.webSearch ? { toolkit: WebTools } : {}),
    ...(call.toolChoice !== undefined ? { toolChoice: call.toolChoice } : {}),
    disableToolCallResolution: true
  }
  const effect = call.object
    ? LanguageModel.generateObject({ prompt, schema: Answer, objectName: "answer" })
    : stream
      ? Stream.runDrain(LanguageModel.streamText(options))
      : LanguageModel.generateText(options)
  return noHandlers(effect.pipe(Effect.either, Effect.provide(layer), Effect.asVoid))
}

const layers = (server: Fake.FakeServer, model: string, options: Models.Options) => {
  const all: Models.Options = { env, baseUrl: `${server.url}/v1`, ...fast, maxRetries: 0, ...options }
  return { ours: Layer.orDie(Models.layer(`openai/${model}`, all)), theirs: legacyLayer(`openai/${model}`, all) }
}

describe("Responses API on MuseKit's own codec", () => {
  it.scopedLive("request bodies: the same bytes as @effect/ai-openai's for every prompt, call and config", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      let compared = 0
      for (const [configName, { model, options }] of Object.entries(configs)) {
        const { ours, theirs } = layers(server, model, options)
        for (const [promptName, prompt] of Object.entries(corpus)) {
          for (const [callName, call] of Object.entries(calls)) {
            for (const stream of call.object ? [false] : [true, false]) {
              const at = server.requests.length
              server.reply(Fake.text(400, "no"), Fake.text(400, "no"))
              yield* send(ours, prompt, call, stream)
              yield* send(theirs, prompt, call, stream)
              const what = `${configName} / ${promptName} / ${callName} / ${stream ? "streamed" : "whole"}`
              const [a, b] = server.requests.slice(at)
              expect(a, what).toBeDefined()
              expect(b, what).toBeDefined()
              expect(a!.raw, what).toBe(b!.raw)
              expect(a!.url, what).toBe(b!.url)
              for (const h of ["content-type", "authorization", "accept"])
                expect(a!.headers[h], `${what}: ${h}`).toBe(b!.headers[h])
              compared++
            }
          }
        }
      }
      expect(compared).toBe(Object.keys(configs).length * Object.keys(corpus).length * 17)
      // the corpus covers what matters: strict fixed per tool, developer role, reasoning items, files
      const bodies = server.requests.map((r) => r.raw).join("\n")
      for (const needle of [
        '"strict":false',
        '"strict":true',
        '"role":"developer"',
        '"type":"reasoning","summary":[{"type":"summary_text","text":"First thought."},{"type":"summary_text","text":"Second thought."}],"encrypted_content":"gAAA=="',
        '"type":"input_image","file_id":"file-abc123","detail":"high"',
        '"filename":"part-6.pdf"',
        '"tool_choice":{"type":"web_search"}',
        '"stream":false',
        '"stream":true'
      ])
        expect(bodies).toContain(needle)
    })
  )

  it.scopedLive("overrides made with OpenAiLanguageModel.withConfigOverride apply, as before", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      const { ours, theirs } = layers(server, "gpt-4.1", { config: { temperature: 1 } })
      const run = (layer: Layer.Layer<LanguageModel.LanguageModel>) =>
        noHandlers(Stream.runDrain(LanguageModel.streamText({ prompt: corpus.plain!, toolkit: Tools }))).pipe(
          OpenAiLanguageModel.withConfigOverride({ temperature: 0, model: "gpt-5", strict: false }),
          Effect.either,
          Effect.provide(layer)
        )
      server.reply(Fake.text(400, "no"), Fake.text(400, "no"))
      yield* run(ours)
      yield* run(theirs)
      const [a, b] = server.requests
      expect(a!.body.temperature).toBe(0)
      expect(a!.body.input[0].role).toBe("developer")
      expect(a!.raw).toBe(b!.raw)
    })
  )

  it.scopedLive("a file of a media type the API does not take fails as before, before any request", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      const { ours, theirs } = layers(server, "gpt-4.1", {})
      const prompt = Prompt.make([
        { role: "user", content: [{ type: "file", mediaType: "text/csv", data: new Uint8Array([97]) }] }
      ])
      const run = (layer: Layer.Layer<LanguageModel.LanguageModel>) =>
        LanguageModel.generateText({ prompt }).pipe(Effect.flip, Effect.provide(layer))
      const [a, b] = [yield* run(ours), yield* run(theirs)]
      expect(a._tag).toBe("MalformedInput")
      expect(a.message).toBe(b.message)
      expect(server.requests.length).toBe(0)
    })
  )

  const ev = (events: Array<[string, Record<string, unknown>]>) =>
    events.map(([type, data], i) => ({ event: type, data: { type, sequence_number: i, ...data } }))
  const response = (status: string, extra: Record<string, unknown> = {}) => ({
    id: "resp_1",
    object: "response",
    created_at: 1741476542,
    status,
    error: null,
    incomplete_details: null,
    instructions: null,
    model: "gpt-5-2025-08-07",
    output: [],
    parallel_tool_calls: true,
    tools: [],
    tool_choice: "auto",
    temperature: 1,
    top_p: 1,
    metadata: {},
    usage: null,
    ...extra
  })
  const usage = {
    input_tokens: 900,
    input_tokens_details: { cached_tokens: 512 },
    output_tokens: 120,
    output_tokens_details: { reasoning_tokens: 64 },
    total_tokens: 1020
  }

  /** Streams the same events to both and returns the parts each passed on (or its error). */
  const bothStreamed = (events: Array<Fake.SseEvent>, toolkit: any = Tools) =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      const { ours, theirs } = layers(server, "gpt-5", {})
      const run = (layer: Layer.Layer<LanguageModel.LanguageModel>) => {
        return LanguageModel.streamText({ prompt: "x", toolkit, disableToolCallResolution: true }).pipe(
          Stream.runCollect,
          Effect.map(Chunk.toArray),
          Effect.either,
          Effect.provide(withIds(layer))
        )
      }
      server.reply(Fake.sse(events), Fake.sse(events))
      return [yield* run(ours), yield* run(theirs)] as const
    })

  const streams: Record<string, Array<Fake.SseEvent>> = {
    text: Wire.responses.text("Hello, world", { usage: { input: 10, output: 3, cached: 4 } }),
    "tool call": Wire.responses.toolCall({ id: "call_7", name: "read_file", args: { path: "a.ts" } }),
    "reasoning summaries, text with citations, two tool calls, keep-alives": [
      { data: "not json" },
      ...ev([
        ["response.created", { response: response("in_progress") }],
        ["keepalive", {}],
        [
          "response.output_item.added",
          {
            output_index: 0,
            item: { id: "rs_1", type: "reasoning", summary: [], encrypted_content: null }
          }
        ],
        [
          "response.reasoning_summary_part.added",
          { item_id: "rs_1", output_index: 0, summary_index: 0, part: { type: "summary_text", text: "" } }
        ],
        ["response.reasoning_summary_text.delta", { item_id: "rs_1", output_index: 0, summary_index: 0, delta: "Hm" }],
        [
          "response.reasoning_summary_part.added",
          { item_id: "rs_1", output_index: 0, summary_index: 1, part: { type: "summary_text", text: "" } }
        ],
        ["response.reasoning_summary_text.delta", { item_id: "rs_1", output_index: 0, summary_index: 1, delta: "ok" }],
        [
          "response.output_item.done",
          {
            output_index: 0,
            item: {
              id: "rs_1",
              type: "reasoning",
              summary: [
                { type: "summary_text", text: "Hm" },
                { type: "summary_text", text: "ok" }
              ],
              encrypted_content: "enc=="
            }
          }
        ],
        [
          "response.output_item.added",
          {
            output_index: 1,
            item: { id: "msg_1", type: "message", status: "in_progress", role: "assistant", content: [] }
          }
        ],
        [
          "response.output_text.delta",
          { item_id: "msg_1", output_index: 1, content_index: 0, delta: "See", logprobs: [] }
        ],
        [
          "response.output_text.annotation.added",
          {
            item_id: "msg_1",
            output_index: 1,
            content_index: 0,
            annotation_index: 0,
            annotation: { type: "url_citation", url: "https://e.com", title: "E", start_index: 0, end_index: 3 }
          }
        ],
        [
          "response.output_text.annotation.added",
          {
            item_id: "msg_1",
            output_index: 1,
            content_index: 0,
            annotation_index: 1,
            annotation: { type: "file_citation", file_id: "file-1", filename: "a.md", index: 3 }
          }
        ],
        [
          "response.output_item.done",
          {
            output_index: 1,
            item: {
              id: "msg_1",
              type: "message",
              status: "completed",
              role: "assistant",
              content: [{ type: "output_text", text: "See", annotations: [] }]
            }
          }
        ],
        ...[2, 3].flatMap(
          (i): Array<[string, Record<string, unknown>]> => [
            [
              "response.output_item.added",
              {
                output_index: i,
                item: { type: "function_call", id: `fc_${i}`, call_id: `call_${i}`, name: "now", arguments: "" }
              }
            ],
            ["response.function_call_arguments.delta", { item_id: `fc_${i}`, output_index: i, delta: "{}" }],
            [
              "response.output_item.done",
              {
                output_index: i,
                item: { type: "function_call", id: `fc_${i}`, call_id: `call_${i}`, name: "now", arguments: "{}" }
              }
            ]
          ]
        ),
        ["response.completed", { response: response("completed", { usage, service_tier: "default" }) }]
      ])
    ],
    "incomplete: max output tokens": ev([
      ["response.created", { response: response("in_progress") }],
      [
        "response.incomplete",
        { response: response("incomplete", { usage, incomplete_details: { reason: "max_output_tokens" } }) }
      ],
      ["response.output_text.delta", { item_id: "msg_x", output_index: 0, content_index: 0, delta: "after the end" }]
    ]),
    "error event mid-stream": ev([
      ["response.created", { response: response("in_progress") }],
      ["error", { code: "server_error", message: "The server had an error.", param: null }],
      ["response.failed", { response: response("failed") }],
      ["response.completed", { response: response("completed", { usage }) }]
    ]),
    "malformed tool arguments": Wire.responses
      .toolCall({ id: "call_1", name: "read_file", args: {} })
      .map((e: any) =>
        e.data.type === "response.output_item.done"
          ? { ...e, data: { ...e.data, item: { ...e.data.item, arguments: "{" } } }
          : e
      )
  }

  for (const [name, events] of Object.entries(streams)) {
    it.scopedLive(`streamed parts: the same as @effect/ai-openai's (${name})`, () =>
      Effect.gen(function* () {
        const [ours, theirs] = yield* bothStreamed(events)
        expect(ours._tag).toBe(theirs._tag)
        if (ours._tag === "Right" && theirs._tag === "Right") {
          expect(ours.right.length).toBeGreaterThanOrEqual(2)
          expect(ours.right).toEqual(theirs.right)
        } else if (ours._tag === "Left" && theirs._tag === "Left") {
          expect((ours.left as Error).message).toBe((theirs.left as Error).message)
        }
      })
    )
  }

  it.scopedLive(
    'a hostile server\'s odd fields (no created_at, an item id "__proto__", a reason "constructor") read as data',
    () =>
      Effect.gen(function* () {
        const { created_at: _, ...noTime } = response("in_progress")
        const [ours] = yield* bothStreamed(
          ev([
            ["response.created", { response: noTime }],
            [
              "response.output_item.added",
              { output_index: 0, item: { id: "__proto__", type: "reasoning", summary: [], encrypted_content: null } }
            ],
            [
              "response.reasoning_summary_part.added",
              { item_id: "__proto__", output_index: 0, summary_index: 1, part: { type: "summary_text", text: "" } }
            ],
            [
              "response.output_item.done",
              { output_index: 0, item: { id: "__proto__", type: "reasoning", summary: [], encrypted_content: null } }
            ],
            [
              "response.incomplete",
              { response: response("incomplete", { usage, incomplete_details: { reason: "constructor" } }) }
            ]
          ])
        )
        expect(ours._tag).toBe("Right")
        if (ours._tag !== "Right") return
        const parts = ours.right as Array<any>
        const meta = parts.find((p) => p.type === "response-metadata")
        expect(JSON.stringify(meta.timestamp)).toMatch(/"value":"\d{4}-\d\d-\d\dT/) // the time it was read
        expect(parts.at(-1)).toMatchObject({ type: "finish", reason: "unknown" })
        expect(({} as any).summaryParts).toBeUndefined()
      })
  )

  it.scopedLive("streamed parts with OpenAI's web search: the same as @effect/ai-openai's", () =>
    Effect.gen(function* () {
      const item = { id: "ws_1", type: "web_search_call", status: "completed", action: { type: "search", query: "q" } }
      const [ours, theirs] = yield* bothStreamed(
        ev([
          ["response.created", { response: response("in_progress") }],
          ["response.output_item.added", { output_index: 0, item: { ...item, status: "in_progress" } }],
          ["response.output_item.done", { output_index: 0, item }],
          ["response.completed", { response: response("completed", { usage }) }]
        ]),
        WebTools
      )
      expect(ours._tag).toBe("Right")
      expect(ours).toEqual(theirs)
    })
  )

  it.scopedLive("whole responses: the same parts as @effect/ai-openai's", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      const { ours, theirs } = layers(server, "gpt-5", {})
      const output = [
        { id: "rs_1", type: "reasoning", summary: [], encrypted_content: "e1" },
        {
          id: "rs_2",
          type: "reasoning",
          summary: [
            { type: "summary_text", text: "a" },
            { type: "summary_text", text: "b" }
          ],
          encrypted_content: "e2"
        },
        { id: "rs_3", type: "reasoning", summary: [{ type: "summary_text", text: "c" }], encrypted_content: null },
        {
          id: "msg_1",
          type: "message",
          status: "completed",
          role: "assistant",
          content: [
            {
              type: "output_text",
              text: "Hello",
              annotations: [
                { type: "url_citation", url: "https://e.com", title: "E", start_index: 0, end_index: 5 },
                { type: "file_citation", file_id: "file-1", filename: "a.md", index: 5 }
              ]
            },
            { type: "refusal", refusal: "No." }
          ]
        },
        {
          id: "msg_1",
          type: "message",
          status: "completed",
          role: "assistant",
          content: [{ type: "output_text", text: "duplicate", annotations: [] }]
        },
        { type: "function_call", id: "fc_1", call_id: "call_1", name: "read_file", arguments: '{"path":"x"}' }
      ]
      const body = response("incomplete", {
        output,
        usage,
        incomplete_details: { reason: "content_filter" },
        service_tier: "flex"
      })
      const run = (layer: Layer.Layer<LanguageModel.LanguageModel>) => {
        return noHandlers(
          LanguageModel.generateText({ prompt: "x", toolkit: Tools, disableToolCallResolution: true })
        ).pipe(
          Effect.map((r) => r.content),
          Effect.provide(withIds(layer))
        )
      }
      server.reply(Fake.json(200, body), Fake.json(200, body))
      const [a, b] = [yield* run(ours), yield* run(theirs)]
      expect(a.length).toBe(11)
      expect(a).toEqual(b)
    })
  )
})
