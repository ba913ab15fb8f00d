import { LanguageModel, Prompt, type Response, Tool, Toolkit } from "@effect/ai"
import * as AnthropicLanguageModel from "@effect/ai-anthropic/AnthropicLanguageModel"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Either, Schema, Stream } from "effect"
import * as Anthropic from "../src/Anthropic.js"
import { Models } from "../src/index.js"
import * as Fake from "./support/FakeServer.js"
import { env, fast, messageOf, ReadFile, usageOf } from "./support/harness.js"
import * as Legacy from "./support/legacyAnthropic.js"
import * as Wire from "./support/wire.js"

// MuseKit's own Anthropic Messages codec against the @effect/ai-anthropic path it replaces: the same
// prompts, tools and config through both, to the same fake server; the request bodies must be the
// same bytes (a user's prompt cache and recorded logs depend on them), and the same streamed events
// must come out as the same parts.

const Grep = Tool.make("grep", {
  parameters: { pattern: Schema.String },
  success: Schema.String,
  failure: Schema.String,
  failureMode: "return"
})
const Now = Tool.make("now", { description: "The time", success: Schema.String })
const Tools = Toolkit.make(ReadFile, Grep, Now)
const handlers = Tools.toLayer({
  read_file: () => Effect.succeed({ content: "" }),
  grep: () => Effect.succeed(""),
  now: () => Effect.succeed("")
})

const eph = { anthropic: { cacheControl: { type: "ephemeral" as const } } }
const hour = { anthropic: { cacheControl: { type: "ephemeral" as const, ttl: "1h" as const } } }
const png = new Uint8Array([137, 80, 78, 71, 13, 10, 26, 10, 0, 255])
const pdf = new TextEncoder().encode("%PDF-1.4 fake")
const odd = 'quotes " backslash \\ nul \u0000 line-sep \u2028 emoji 😀 lone \ud800 tab\t'

const turn = (...messages: Array<Prompt.MessageEncoded>) => Prompt.make(messages).content

// A session's history: the same message objects from request to request, as an agent keeps them.
const h1 = turn(
  { role: "system", content: "You are a test.", options: eph },
  { role: "user", content: "Read README.md" }
)
const h2 = turn(
  {
    role: "assistant",
    content: [
      {
        type: "reasoning",
        text: "They want the file.",
        options: { anthropic: { type: "thinking", signature: "sig==" } }
      },
      { type: "reasoning", text: "", options: { anthropic: { type: "redacted_thinking", redactedData: "enc==" } } },
      { type: "reasoning", text: "no provider data" },
      { type: "text", text: "Let me read it. " },
      { type: "tool-call", id: "toolu_1", name: "read_file", params: { path: "README.md" }, providerExecuted: false },
      { type: "tool-call", id: "toolu_2", name: "grep", params: { pattern: odd }, providerExecuted: false }
    ]
  },
  {
    role: "tool",
    content: [
      {
        type: "tool-result",
        id: "toolu_1",
        name: "read_file",
        result: { content: "# Hello\n" },
        isFailure: false,
        providerExecuted: false
      },
      {
        type: "tool-result",
        id: "toolu_2",
        name: "grep",
        result: "bad pattern",
        isFailure: true,
        providerExecuted: false
      }
    ]
  }
)
const h3 = turn(
  {
    role: "user",
    content: [
      { type: "text", text: `look ${odd}`, options: hour },
      { type: "file", mediaType: "image/png", data: png },
      { type: "file", mediaType: "image/jpeg", data: "iVBORw0KGgo=" },
      { type: "file", mediaType: "image/*", data: png },
      { type: "file", mediaType: "image/png", data: new URL("https://example.com/a.png") },
      { type: "file", mediaType: "application/pdf", fileName: "a.pdf", data: pdf },
      {
        type: "file",
        mediaType: "application/pdf",
        data: pdf,
        options: { anthropic: { documentTitle: "Spec", documentContext: "v2" } }
      },
      { type: "file", mediaType: "text/plain", fileName: "notes.txt", data: "plain notes" }
    ]
  },
  // video frames go as images
  {
    role: "user",
    content: [
      { type: "text", text: "frames:" },
      { type: "file", mediaType: "image/jpeg", data: png },
      { type: "file", mediaType: "image/jpeg", data: png }
    ]
  }
)
const h4 = turn({
  role: "assistant",
  content: [{ type: "text", text: "  Done, with trailing space.  \n" }]
})
const h5 = turn(
  { role: "user", content: "next", options: eph },
  {
    role: "assistant",
    content: [
      { type: "tool-call", id: "toolu_3", name: "now", params: {}, providerExecuted: false, options: eph },
      { type: "text", text: "Checking." }
    ],
    options: eph
  },
  {
    role: "tool",
    content: [
      { type: "tool-result", id: "toolu_3", name: "now", result: null, isFailure: false, providerExecuted: false }
    ],
    options: eph
  },
  {
    role: "tool",
    content: [
      {
        type: "tool-result",
        id: "toolu_3",
        name: "now",
        result: "noon",
        isFailure: false,
        providerExecuted: false,
        options: hour
      }
    ]
  }
)

/** The newest message with a cache breakpoint, as MuseKit's agent sends it (a new object each request). */
const withBreakpoint = (messages: ReadonlyArray<Prompt.Message>): Prompt.Prompt => {
  const last = messages[messages.length - 1]!
  return Prompt.fromMessages([
    ...messages.slice(0, -1),
    last.role === "assistant"
      ? last
      : (Prompt.makeMessage(last.role as any, { content: last.content as any, options: eph }) as Prompt.Message)
  ])
}

const session: Array<Prompt.Prompt> = [
  Prompt.fromMessages(h1),
  withBreakpoint(h1),
  withBreakpoint([...h1, ...h2]),
  withBreakpoint([...h1, ...h2, ...h3]),
  Prompt.fromMessages([...h1, ...h2, ...h3, ...h4]), // ends with the assistant: its text is trimmed
  withBreakpoint([...h1, ...h2, ...h3, ...h4, ...h5]), // the same message, not last any more: not trimmed
  Prompt.fromMessages([...h1, ...h2, ...h3, ...h4, ...h5, ...h4]),
  // odd shapes: several system messages, one between user turns (the last one is sent), no system
  Prompt.make([
    { role: "system", content: "first" },
    { role: "system", content: "second", options: eph },
    { role: "user", content: "x" },
    { role: "system", content: "third" },
    { role: "user", content: [] },
    { role: "tool", content: [] }
  ]),
  Prompt.make([{ role: "user", content: odd }]),
  Prompt.make([{ role: "assistant", content: [] }])
]

type Call = {
  readonly label: string
  readonly options?: Models.Options
  readonly override?: AnthropicLanguageModel.Config.Service
  readonly tools?: { readonly toolChoice: LanguageModel.ToolChoice<"read_file" | "grep" | "now"> }
}

const calls: ReadonlyArray<Call> = [
  { label: "no tools" },
  { label: "tools, auto", tools: { toolChoice: "auto" } },
  { label: "tools, required", tools: { toolChoice: "required" } },
  { label: "tools, none", tools: { toolChoice: "none" } },
  { label: "tools, one tool", tools: { toolChoice: { tool: "grep" } } },
  { label: "tools, one of", tools: { toolChoice: { mode: "required", oneOf: ["grep", "now"] } } },
  {
    label: "config and max output tokens",
    options: { config: { temperature: 0.2, metadata: { user_id: "u-1" } }, maxOutputTokens: 1000 },
    tools: { toolChoice: "auto" }
  },
  {
    label: "config override, parallel tool calls off",
    override: { temperature: 0, disableParallelToolCalls: true, thinking: { type: "enabled", budget_tokens: 2048 } },
    tools: { toolChoice: "auto" }
  },
  { label: "config with max_tokens and stream", options: { config: { stream: false, max_tokens: 99, top_k: 3 } } },
  { label: "config naming a request field", options: { config: { system: [{ type: "text", text: "cfg" }] } } }
]

const spec = "anthropic/claude-sonnet-4-5"

/** The legacy and the new model for the same resolved spec and options, to the fake server. */
const models = (server: Fake.FakeServer, extra: Models.Options = {}) =>
  Effect.gen(function* () {
    const options: Models.Options = { env, baseUrl: server.url, ...fast, ...extra }
    const r = Either.getOrThrow(Models.resolve(spec, options))
    return { legacy: yield* Legacy.make(r, options), own: yield* Anthropic.make(r, options) }
  })

const message = (content: Array<unknown>) => ({
  id: "msg_1",
  type: "message",
  role: "assistant",
  model: "claude-sonnet-4-5",
  content,
  stop_reason: "end_turn",
  stop_sequence: null,
  usage: { input_tokens: 10, output_tokens: 2, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
})

const sent = (r: Fake.Recorded) => ({ url: r.url, beta: r.headers["anthropic-beta"], body: r.raw })

describe("anthropic: MuseKit's Messages codec sends what @effect/ai-anthropic sent", () => {
  it.scopedLive("the same request bytes for a session's prompts, tools, choices and config, streamed and whole", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      let compared = 0
      for (const call of calls) {
        const { legacy, own } = yield* models(server, call.options)
        for (const prompt of session) {
          const tools = call.tools === undefined ? {} : { toolkit: Tools, toolChoice: call.tools.toolChoice }
          const run = (model: LanguageModel.Service) => {
            const stream = LanguageModel.streamText({ prompt, ...tools, disableToolCallResolution: true }).pipe(
              Stream.runDrain
            )
            const whole = LanguageModel.generateText({ prompt, ...tools, disableToolCallResolution: true })
            return Effect.all([stream, whole]).pipe(
              (e) => (call.override === undefined ? e : AnthropicLanguageModel.withConfigOverride(e, call.override)),
              Effect.provide(handlers),
              Effect.provideService(LanguageModel.LanguageModel, model)
            )
          }
          const reply = () => server.reply(Fake.sse(Wire.anthropic.text("ok")), Fake.json(200, message([])))
          const before = server.requests.length
          reply()
          yield* run(legacy)
          reply()
          yield* run(own)
          const [oldStream, oldWhole, newStream, newWhole] = server.requests.slice(before).map(sent)
          expect(newStream, `${call.label}, streamed`).toEqual(oldStream)
          expect(newWhole, `${call.label}, whole`).toEqual(oldWhole)
          compared += 2
        }
      }
      expect(compared).toBe(calls.length * session.length * 2)
      // what the corpus covers, in the bodies themselves
      const bodies = server.requests.map((r) => r.raw).join("\n")
      for (const needle of [
        '"cache_control":{"type":"ephemeral","ttl":"1h"}',
        '"type":"thinking","thinking":"They want the file.","signature":"sig=="',
        '"type":"redacted_thinking","data":"enc=="',
        '"is_error":true',
        '"type":"image","source":{"type":"url"',
        '"media_type":"image/jpeg"',
        '"type":"document","source":{"type":"base64","media_type":"application/pdf"',
        '"title":"Spec","context":"v2"',
        '"text":"Done, with trailing space."',
        '"text":"  Done, with trailing space.  \\n"',
        '"disable_parallel_tool_use":true',
        '"tool_choice":{"type":"any"}',
        '"stream":true'
      ])
        expect(bodies).toContain(needle)
      expect(server.requests.some((r) => r.headers["anthropic-beta"] === "pdfs-2024-09-25")).toBe(true)
    }).pipe(Effect.provide(NodeHttpClient.layerUndici))
  )

  it.scopedLive("generateObject: the same request bytes and the same object", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      const { legacy, own } = yield* models(server)
      const answer = { type: "tool_use", id: "toolu_9", name: "answer", input: { answer: "42" } }
      const run = (model: LanguageModel.Service) =>
        LanguageModel.generateObject({
          prompt: Prompt.fromMessages([...h1, ...h2]),
          schema: Schema.Struct({ answer: Schema.String }).annotations({ description: "The answer" }),
          objectName: "answer"
        }).pipe(Effect.provideService(LanguageModel.LanguageModel, model))
      server.reply(Fake.json(200, message([answer])), Fake.json(200, message([answer])))
      const a = yield* run(legacy)
      const b = yield* run(own)
      expect(b.value).toEqual(a.value)
      expect(b.value).toEqual({ answer: "42" })
      expect(server.requests[1]!.raw).toBe(server.requests[0]!.raw)
      expect(server.requests[1]!.body.tool_choice).toEqual({
        type: "tool",
        name: "answer",
        disable_parallel_tool_use: true
      })
    }).pipe(Effect.provide(NodeHttpClient.layerUndici))
  )
})

// ---------------------------------------------------------------------------------------------
// Streams read the same

const start = (usage: Record<string, unknown>) => ({
  event: "message_start",
  data: {
    type: "message_start",
    message: {
      id: "msg_s",
      type: "message",
      role: "assistant",
      content: [],
      model: "claude-sonnet-4-5",
      stop_reason: null,
      stop_sequence: null,
      usage
    }
  }
})
const ev = (data: Record<string, unknown>) => ({ event: data.type as string, data })
const blockStart = (index: number, content_block: unknown) => ev({ type: "content_block_start", index, content_block })
const delta = (index: number, d: unknown) => ev({ type: "content_block_delta", index, delta: d })
const stop = (index: number) => ev({ type: "content_block_stop", index })
const end = (stop_reason: string, output = 30, stop_sequence: string | null = null) => [
  ev({ type: "message_delta", delta: { stop_reason, stop_sequence }, usage: { output_tokens: output } }),
  ev({ type: "message_stop" })
]
const usage = { input_tokens: 12, output_tokens: 1, cache_creation_input_tokens: 300, cache_read_input_tokens: 2000 }

const streams: Record<string, Array<Fake.SseEvent>> = {
  "thinking with a signature, redacted thinking, text, two tool calls": [
    start(usage),
    blockStart(0, { type: "thinking", thinking: "", signature: "" }),
    delta(0, { type: "thinking_delta", thinking: "Let me " }),
    delta(0, { type: "thinking_delta", thinking: "think." }),
    delta(0, { type: "signature_delta", signature: "EqQBCgIYAhIM==" }),
    stop(0),
    blockStart(1, { type: "redacted_thinking", data: "EmwKAhgBEgy==" }),
    stop(1),
    { event: "ping", data: { type: "ping" } },
    blockStart(2, { type: "text", text: "" }),
    delta(2, { type: "text_delta", text: `Reading ${odd}` }),
    stop(2),
    blockStart(3, { type: "tool_use", id: "toolu_a", name: "read_file", input: {} }),
    delta(3, { type: "input_json_delta", partial_json: '{"path": "RE' }),
    delta(3, { type: "input_json_delta", partial_json: 'ADME.md"}' }),
    stop(3),
    blockStart(4, { type: "tool_use", id: "toolu_b", name: "now", input: {} }),
    stop(4),
    ...end("tool_use", 89)
  ],
  "max tokens, a stop sequence, usage without cache fields": [
    start({ input_tokens: 5, output_tokens: 1 }),
    blockStart(0, { type: "text", text: "" }),
    delta(0, { type: "text_delta", text: "cut" }),
    stop(0),
    ...end("max_tokens", 7, "END")
  ],
  refusal: [start(usage), ...end("refusal", 0)],
  "pause turn": [start(usage), ...end("pause_turn", 3)],
  "an error event mid-stream": [
    start(usage),
    blockStart(0, { type: "text", text: "" }),
    delta(0, { type: "text_delta", text: "Hel" }),
    ev({ type: "error", error: { type: "overloaded_error", message: "Overloaded" } })
  ]
}

const comparable = (part: Response.StreamPart<any>) => {
  const { timestamp: _t, metadata: _m, ...rest } = part as any
  if (part.type === "finish") return { ...rest, usage: usageOf(part.usage) }
  return { ...rest, ...(_m !== undefined && Object.keys(_m).length > 0 ? { metadata: _m } : {}) }
}

describe("anthropic: MuseKit's Messages codec reads streams as @effect/ai-anthropic did", () => {
  for (const [label, events] of Object.entries(streams)) {
    it.scopedLive(label, () =>
      Effect.gen(function* () {
        const server = yield* Fake.make
        const { legacy, own } = yield* models(server)
        const run = (model: LanguageModel.Service) =>
          LanguageModel.streamText({ prompt: "go", toolkit: Tools, disableToolCallResolution: true }).pipe(
            Stream.takeUntil((p) => p.type === "error"),
            Stream.runCollect,
            Effect.map((c) => Chunk.toArray(c).map(comparable)),
            Effect.provide(handlers),
            Effect.provideService(LanguageModel.LanguageModel, model)
          )
        server.reply(Fake.sse(events), Fake.sse(events))
        const a = yield* run(legacy)
        const b = yield* run(own)
        expect(b).toEqual(a)
        expect(b.length).toBeGreaterThan(1)
      }).pipe(Effect.provide(NodeHttpClient.layerUndici))
    )
  }

  it.scopedLive("citations of the prompt's documents: the same source parts, streamed and whole", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      const { legacy, own } = yield* models(server)
      const prompt = Prompt.make([
        {
          role: "user",
          content: [
            { type: "file", mediaType: "text/plain", data: "plain", fileName: "plain.txt" },
            {
              type: "file",
              mediaType: "application/pdf",
              fileName: "spec.pdf",
              data: pdf,
              options: { anthropic: { citations: { enabled: true } } }
            },
            { type: "text", text: "What does the spec say?" }
          ]
        }
      ])
      const chars = {
        type: "char_location",
        cited_text: "fake",
        document_index: 0,
        document_title: null,
        start_char_index: 9,
        end_char_index: 13
      }
      const pages = {
        type: "page_location",
        cited_text: "PDF",
        document_index: 0,
        document_title: "Spec",
        start_page_number: 1,
        end_page_number: 2
      }
      const events = [
        start(usage),
        blockStart(0, { type: "text", text: "" }),
        delta(0, { type: "text_delta", text: "It is fake." }),
        delta(0, { type: "citations_delta", citation: chars }),
        delta(0, { type: "citations_delta", citation: pages }),
        delta(0, { type: "citations_delta", citation: { ...chars, document_index: 5 } }),
        stop(0),
        ...end("end_turn")
      ]
      const withoutIds = (parts: ReadonlyArray<any>) =>
        parts.map((p) => (p.type === "source" ? { ...comparable(p), id: typeof p.id } : comparable(p)))
      const streamed = (model: LanguageModel.Service) =>
        LanguageModel.streamText({ prompt }).pipe(
          Stream.runCollect,
          Effect.map((c) => withoutIds(Chunk.toArray(c))),
          Effect.provideService(LanguageModel.LanguageModel, model)
        )
      const whole = (model: LanguageModel.Service) =>
        LanguageModel.generateText({ prompt }).pipe(
          Effect.map((r) => withoutIds(r.content)),
          Effect.provideService(LanguageModel.LanguageModel, model)
        )
      const cited = message([{ type: "text", text: "It is fake.", citations: [chars, pages] }])
      server.reply(Fake.sse(events), Fake.sse(events), Fake.json(200, cited), Fake.json(200, cited))
      const sa = yield* streamed(legacy)
      const sb = yield* streamed(own)
      expect(sb).toEqual(sa)
      expect(sb.filter((p) => p.type === "source")).toHaveLength(2)
      expect(sb.find((p) => p.type === "source")).toMatchObject({ title: "spec.pdf", mediaType: "application/pdf" })
      const wa = yield* whole(legacy)
      const wb = yield* whole(own)
      expect(wb).toEqual(wa)
      expect(wb.filter((p) => p.type === "source")).toHaveLength(2)
      expect(server.requests[3]!.raw).toBe(server.requests[2]!.raw)
    }).pipe(Effect.provide(NodeHttpClient.layerUndici))
  )

  it.scopedLive("a stream whose events are not named ends at message_stop, the connection left open", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      const { own } = yield* models(server)
      server.reply((_req, res) => {
        res.writeHead(200, { "content-type": "text/event-stream" })
        for (const e of Wire.anthropic.text("unnamed")) res.write(Fake.frame({ data: e.data }))
      })
      const started = Date.now()
      const parts = yield* LanguageModel.streamText({ prompt: "go" }).pipe(
        Stream.runCollect,
        Effect.map(Chunk.toArray),
        Effect.provideService(LanguageModel.LanguageModel, own)
      )
      expect(parts.flatMap((p) => (p.type === "text-delta" ? [p.delta] : []))).toEqual(["unnamed"])
      expect(parts.at(-1)?.type).toBe("finish")
      expect(Date.now() - started).toBeLessThan(2000)
    }).pipe(Effect.provide(NodeHttpClient.layerUndici))
  )

  it.scopedLive("usage counts cache reads and writes as input, streamed and whole", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      const { own } = yield* models(server)
      server.reply(Fake.sse(streams["refusal"]!), Fake.json(200, { ...message([]), usage }))
      const streamed = yield* LanguageModel.streamText({ prompt: "go" }).pipe(
        Stream.runCollect,
        Effect.provideService(LanguageModel.LanguageModel, own)
      )
      const finish = Chunk.toArray(streamed).find((p) => p.type === "finish") as Response.FinishPart
      expect(finish.reason).toBe("content-filter")
      expect(usageOf(finish.usage)).toEqual({
        inputTokens: 2312,
        outputTokens: 0,
        totalTokens: 2312,
        cachedInputTokens: 2000,
        reasoningTokens: 0
      })
      const whole = yield* LanguageModel.generateText({ prompt: "go" }).pipe(
        Effect.provideService(LanguageModel.LanguageModel, own)
      )
      expect(usageOf(whole.usage)).toEqual({
        inputTokens: 2312,
        outputTokens: 1,
        totalTokens: 2313,
        cachedInputTokens: 2000,
        reasoningTokens: 0
      })
    }).pipe(Effect.provide(NodeHttpClient.layerUndici))
  )

  it.scopedLive('a whole message with a null block or a stop reason "constructor" reads as data', () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      const { own } = yield* models(server)
      server.reply(Fake.json(200, { ...message([null, { type: "text", text: "hi" }]), stop_reason: "constructor" }))
      const whole = yield* LanguageModel.generateText({ prompt: "go" }).pipe(
        Effect.provideService(LanguageModel.LanguageModel, own)
      )
      expect(whole.text).toBe("hi")
      expect(whole.finishReason).toBe("unknown")
    }).pipe(Effect.provide(NodeHttpClient.layerUndici))
  )

  it.scopedLive("errors read the same: malformed tool arguments, an unsupported file, a 400", () =>
    Effect.gen(function* () {
      const server = yield* Fake.make
      const { legacy, own } = yield* models(server)
      const broken = [
        start(usage),
        blockStart(0, { type: "tool_use", id: "toolu_x", name: "read_file", input: {} }),
        delta(0, { type: "input_json_delta", partial_json: '{"path": "READ' }),
        stop(0),
        ...end("tool_use")
      ]
      const streamed = (model: LanguageModel.Service) =>
        LanguageModel.streamText({ prompt: "go", toolkit: Tools, disableToolCallResolution: true }).pipe(
          Stream.runDrain,
          Effect.provide(handlers),
          Effect.provideService(LanguageModel.LanguageModel, model),
          Effect.flip
        )
      server.reply(Fake.sse(broken), Fake.sse(broken))
      const a = yield* streamed(legacy)
      const b = yield* streamed(own)
      expect(messageOf(b)).toBe(messageOf(a))
      expect(messageOf(b)).toBe(
        `anthropic returned malformed JSON arguments for tool 'read_file': "{\\"path\\": \\"READ"`
      )

      const video = (model: LanguageModel.Service) =>
        LanguageModel.generateText({
          prompt: [{ role: "user", content: [{ type: "file", mediaType: "video/mp4", data: png }] }]
        }).pipe(Effect.provideService(LanguageModel.LanguageModel, model), Effect.flip)
      const va = yield* video(legacy)
      const vb = yield* video(own)
      expect(vb._tag).toBe(va._tag)
      expect(messageOf(vb)).toBe(messageOf(va))

      const bad = Fake.json(400, {
        type: "error",
        error: { type: "invalid_request_error", message: "max_tokens: too large" }
      })
      server.reply(bad, bad, bad, bad)
      const whole = (model: LanguageModel.Service) =>
        LanguageModel.generateText({ prompt: "go" }).pipe(
          Effect.provideService(LanguageModel.LanguageModel, model),
          Effect.flip
        )
      const streamedBad = (model: LanguageModel.Service) =>
        LanguageModel.streamText({ prompt: "go" }).pipe(
          Stream.runDrain,
          Effect.provideService(LanguageModel.LanguageModel, model),
          Effect.flip
        )
      const wa = yield* whole(legacy)
      const wb = yield* whole(own)
      expect(messageOf(wb)).toBe(messageOf(wa))
      expect(messageOf(wb)).toBe("anthropic rejected the request (400): max_tokens: too large.")
      const sa = yield* streamedBad(legacy)
      const sb = yield* streamedBad(own)
      expect(messageOf(sb)).toBe(messageOf(sa))
    }).pipe(Effect.provide(NodeHttpClient.layerUndici))
  )
})
