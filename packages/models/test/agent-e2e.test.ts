import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { LanguageModel } from "@effect/ai"
import { describe, expect, it } from "@effect/vitest"
import { Agent, Model, Session } from "@musekit/core"
import { autoPrompter, layerAgentServices } from "@musekit/core/testing"
import { CodingTools, EventLogFile, WorkspaceNode } from "@musekit/node"
import { Effect, Layer } from "effect"
import { Models } from "../src/index.js"
import * as Fake from "./support/FakeServer.js"

// The end-to-end test of the agent loop (packages/node/test/EndToEnd.test.ts), with the model served
// through each provider adapter: a fake server on 127.0.0.1 speaks the provider's streaming wire
// format, and its reply is a function of the request body — the number of tool results already in
// the conversation says which step the model is at.

/** A real git repository whose unit test fails until `sum.js` is fixed. */
const makeBuggyRepo = (): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "muse-models-e2e-"))
  fs.writeFileSync(
    path.join(dir, "package.json"),
    JSON.stringify({ name: "demo", private: true, type: "module", scripts: { test: "node --test" } }, null, 2)
  )
  fs.writeFileSync(path.join(dir, "sum.js"), "export const sum = (a, b) => a - b\n")
  fs.writeFileSync(
    path.join(dir, "sum.test.js"),
    'import { test } from "node:test"\nimport assert from "node:assert"\nimport { sum } from "./sum.js"\n\ntest("adds", () => assert.strictEqual(sum(2, 3), 5))\n'
  )
  const git = (...args: Array<string>) =>
    execFileSync("git", ["-c", "user.name=Test", "-c", "user.email=test@example.invalid", ...args], { cwd: dir })
  git("init", "-q", "-b", "main")
  git("add", ".")
  git("commit", "-q", "-m", "buggy sum")
  return dir
}

/** What the model does at each step: read, fix, run the tests, then stop. */
const calls = [
  { name: "read_file", params: { path: "sum.js" } },
  { name: "edit_file", params: { path: "sum.js", edits: [{ old_text: "a - b", new_text: "a + b" }] } },
  { name: "run_shell", params: { command: "npm test" } }
] as const
const FINAL = "Fixed."

/** Token usage the server reports at each step (distinct per step, so each event is checked). */
const usageAt = (step: number) => ({ input: 100 + 10 * step, output: 5 + step })

/** A JSON text split into two fragments, so the adapters must assemble streamed arguments. */
const halves = (s: string): [string, string] => [s.slice(0, Math.ceil(s.length / 2)), s.slice(Math.ceil(s.length / 2))]

const parse = (x: unknown): any => (typeof x === "string" ? JSON.parse(x) : x)

interface ToolResult {
  readonly id: string
  readonly value: any
}

/** One provider's wire format, as far as this test needs it. */
interface Wire {
  readonly spec: string
  readonly env: Record<string, string>
  /** Appended to the fake server's URL to make the base URL. */
  readonly basePath: string
  readonly url: string
  readonly checkRequest: (req: Fake.Recorded) => void
  /** The tool results in a request body, in order. */
  readonly toolResults: (body: any) => Array<ToolResult>
  /** The id the provider gives the tool call of a step ("" where the wire has none). */
  readonly callId: (step: number) => string
  readonly toolCall: (step: number) => Array<Fake.SseEvent>
  readonly text: (step: number, text: string) => Array<Fake.SseEvent>
}

// --- OpenAI Responses API (POST /v1/responses, stream: true) ----------------------------------

const openaiResponse = (output: Array<unknown>, usage: unknown, status: string) => ({
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
  usage,
  user: null,
  metadata: {}
})

const openaiUsage = (step: number) => {
  const u = usageAt(step)
  return {
    input_tokens: u.input,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: u.output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: u.input + u.output
  }
}

const openaiEvents = () => {
  let seq = 0
  return (type: string, data: Record<string, unknown>): Fake.SseEvent => ({
    event: type,
    data: { type, sequence_number: seq++, ...data }
  })
}

const openai: Wire = {
  spec: "openai/gpt-4.1-mini",
  env: { OPENAI_API_KEY: "test-key" },
  basePath: "/v1",
  url: "/v1/responses",
  checkRequest: (req) => {
    expect(req.headers.authorization).toBe("Bearer test-key")
    expect(req.body.model).toBe("gpt-4.1-mini")
    expect(req.body.stream).toBe(true)
  },
  toolResults: (body) =>
    (body.input ?? [])
      .filter((i: any) => i.type === "function_call_output")
      .map((i: any) => ({ id: i.call_id, value: parse(i.output) })),
  callId: (step) => `call_${step}`,
  toolCall: (step) => {
    const ev = openaiEvents()
    const { name, params } = calls[step]!
    const args = JSON.stringify(params)
    const item = (status: string, a: string) => ({
      type: "function_call",
      id: `fc_${step}`,
      call_id: `call_${step}`,
      name,
      arguments: a,
      status
    })
    return [
      ev("response.created", { response: openaiResponse([], null, "in_progress") }),
      ev("response.output_item.added", { output_index: 0, item: item("in_progress", "") }),
      ...halves(args).map((delta) =>
        ev("response.function_call_arguments.delta", { item_id: `fc_${step}`, output_index: 0, delta })
      ),
      ev("response.function_call_arguments.done", { item_id: `fc_${step}`, output_index: 0, arguments: args }),
      ev("response.output_item.done", { output_index: 0, item: item("completed", args) }),
      ev("response.completed", {
        response: openaiResponse([item("completed", args)], openaiUsage(step), "completed")
      })
    ]
  },
  text: (step, text) => {
    const ev = openaiEvents()
    const message = {
      type: "message",
      id: "msg_1",
      status: "completed",
      role: "assistant",
      content: [{ type: "output_text", text, annotations: [] }]
    }
    return [
      ev("response.created", { response: openaiResponse([], null, "in_progress") }),
      ev("response.in_progress", { response: openaiResponse([], null, "in_progress") }),
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
      ...halves(text).map((delta) =>
        ev("response.output_text.delta", { item_id: "msg_1", output_index: 0, content_index: 0, delta, logprobs: [] })
      ),
      ev("response.output_text.done", { item_id: "msg_1", output_index: 0, content_index: 0, text, logprobs: [] }),
      ev("response.content_part.done", {
        item_id: "msg_1",
        output_index: 0,
        content_index: 0,
        part: { type: "output_text", text, annotations: [] }
      }),
      ev("response.output_item.done", { output_index: 0, item: message }),
      ev("response.completed", { response: openaiResponse([message], openaiUsage(step), "completed") })
    ]
  }
}

// --- Anthropic Messages API (POST /v1/messages, stream: true) ---------------------------------

const anthropicStart = (step: number): Fake.SseEvent => ({
  event: "message_start",
  data: {
    type: "message_start",
    message: {
      id: `msg_0${step}`,
      type: "message",
      role: "assistant",
      content: [],
      model: "claude-sonnet-4-5-20250929",
      stop_reason: null,
      stop_sequence: null,
      usage: {
        input_tokens: usageAt(step).input,
        output_tokens: 1,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 0
      }
    }
  }
})

const anthropicEnd = (step: number, stop_reason: string): Array<Fake.SseEvent> => [
  { event: "content_block_stop", data: { type: "content_block_stop", index: 0 } },
  {
    event: "message_delta",
    data: {
      type: "message_delta",
      delta: { stop_reason, stop_sequence: null },
      usage: { output_tokens: usageAt(step).output }
    }
  },
  { event: "message_stop", data: { type: "message_stop" } }
]

const anthropic: Wire = {
  spec: "anthropic/claude-sonnet-4-5",
  env: { ANTHROPIC_API_KEY: "test-key" },
  basePath: "",
  url: "/v1/messages",
  checkRequest: (req) => {
    expect(req.headers["x-api-key"]).toBe("test-key")
    expect(req.headers["anthropic-version"]).toBe("2023-06-01")
    expect(req.body.model).toBe("claude-sonnet-4-5")
    expect(req.body.stream).toBe(true)
    // prompt-cache breakpoints: the system prompt, and the newest message (the whole stable prefix)
    const ephemeral = (blocks: unknown) =>
      Array.isArray(blocks) && blocks.some((b: any) => b?.cache_control?.type === "ephemeral")
    expect(ephemeral(req.body.system)).toBe(true)
    expect(ephemeral(req.body.messages.at(-1).content)).toBe(true)
    expect(req.body.messages.slice(0, -1).some((m: any) => ephemeral(m.content))).toBe(false)
  },
  toolResults: (body) =>
    (body.messages ?? [])
      .flatMap((m: any) => (Array.isArray(m.content) ? m.content : []))
      .filter((c: any) => c.type === "tool_result")
      .map((c: any) => ({
        id: c.tool_use_id,
        value: parse(Array.isArray(c.content) ? c.content.map((b: any) => b.text).join("") : c.content)
      })),
  callId: (step) => `toolu_0${step}`,
  toolCall: (step) => {
    const { name, params } = calls[step]!
    return [
      anthropicStart(step),
      {
        event: "content_block_start",
        data: {
          type: "content_block_start",
          index: 0,
          content_block: { type: "tool_use", id: `toolu_0${step}`, name, input: {} }
        }
      },
      { event: "ping", data: { type: "ping" } },
      ...halves(JSON.stringify(params)).map((partial_json) => ({
        event: "content_block_delta",
        data: { type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json } }
      })),
      ...anthropicEnd(step, "tool_use")
    ]
  },
  text: (step, text) => [
    anthropicStart(step),
    {
      event: "content_block_start",
      data: { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }
    },
    ...halves(text).map((t) => ({
      event: "content_block_delta",
      data: { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: t } }
    })),
    ...anthropicEnd(step, "end_turn")
  ]
}

// --- Google Gemini (POST /v1beta/models/{model}:streamGenerateContent?alt=sse) -----------------

const googleUsage = (step: number) => {
  const u = usageAt(step)
  return {
    promptTokenCount: u.input,
    candidatesTokenCount: u.output,
    totalTokenCount: u.input + u.output,
    promptTokensDetails: [{ modality: "TEXT", tokenCount: u.input }]
  }
}

const googleChunk = (parts: Array<unknown>, finishReason: string | null, usage: unknown): Fake.SseEvent => ({
  data: {
    candidates: [{ content: { parts, role: "model" }, ...(finishReason !== null ? { finishReason } : {}), index: 0 }],
    usageMetadata: usage,
    modelVersion: "gemini-2.5-flash",
    responseId: "Wq3AaIqQHdHWz7IPh8yb4Ac"
  }
})

const google: Wire = {
  spec: "google/gemini-2.5-flash",
  env: { GEMINI_API_KEY: "test-key" },
  basePath: "",
  url: "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
  checkRequest: (req) => {
    expect(req.headers["x-goog-api-key"]).toBe("test-key")
  },
  toolResults: (body) =>
    (body.contents ?? [])
      .flatMap((c: any) => c.parts ?? [])
      .filter((p: any) => p.functionResponse !== undefined)
      .map((p: any) => ({ id: p.functionResponse.name, value: parse(p.functionResponse.response) })),
  // Gemini's function calls carry no id; results are matched by name
  callId: (step) => calls[step]!.name,
  toolCall: (step) => {
    const { name, params } = calls[step]!
    return [googleChunk([{ functionCall: { name, args: params } }], "STOP", googleUsage(step))]
  },
  text: (step, text) => {
    const [a, b] = halves(text)
    return [
      googleChunk([{ text: a }], null, { promptTokenCount: usageAt(step).input, candidatesTokenCount: 1 }),
      googleChunk([{ text: b }], "STOP", googleUsage(step))
    ]
  }
}

// --- OpenAI-compatible Chat Completions (POST /v1/chat/completions, stream: true) -------------

const compatChunk = (delta: Record<string, unknown>, finish_reason: string | null = null): Fake.SseEvent => ({
  data: {
    id: "chatcmpl-123",
    object: "chat.completion.chunk",
    created: 1741570283,
    model: "qwen2.5-coder",
    system_fingerprint: "fp_local",
    choices: [{ index: 0, delta, logprobs: null, finish_reason }]
  }
})

const compatUsage = (step: number): Fake.SseEvent => {
  const u = usageAt(step)
  return {
    data: {
      id: "chatcmpl-123",
      object: "chat.completion.chunk",
      created: 1741570283,
      model: "qwen2.5-coder",
      choices: [],
      usage: { prompt_tokens: u.input, completion_tokens: u.output, total_tokens: u.input + u.output }
    }
  }
}

const DONE: Fake.SseEvent = { data: "[DONE]" }

const compat: Wire = {
  spec: "openai-compatible/qwen2.5-coder",
  env: { OPENAI_COMPATIBLE_API_KEY: "test-key" },
  basePath: "/v1",
  url: "/v1/chat/completions",
  checkRequest: (req) => {
    expect(req.headers.authorization).toBe("Bearer test-key")
    expect(req.body).toMatchObject({ model: "qwen2.5-coder", stream: true, stream_options: { include_usage: true } })
  },
  toolResults: (body) =>
    (body.messages ?? [])
      .filter((m: any) => m.role === "tool")
      .map((m: any) => ({ id: m.tool_call_id, value: parse(m.content) })),
  callId: (step) => `call_${step}`,
  toolCall: (step) => {
    const { name, params } = calls[step]!
    const [a, b] = halves(JSON.stringify(params))
    return [
      compatChunk({
        role: "assistant",
        content: null,
        tool_calls: [{ id: `call_${step}`, index: 0, type: "function", function: { name, arguments: "" } }]
      }),
      compatChunk({ tool_calls: [{ index: 0, function: { arguments: a } }] }),
      compatChunk({ tool_calls: [{ index: 0, function: { arguments: b } }] }),
      compatChunk({}, "tool_calls"),
      compatUsage(step),
      DONE
    ]
  },
  text: (step, text) => [
    compatChunk({ role: "assistant", content: "" }),
    ...halves(text).map((content) => compatChunk({ content })),
    compatChunk({}, "stop"),
    compatUsage(step),
    DONE
  ]
}

// ---------------------------------------------------------------------------------------------

/** The scripted model of EndToEnd.test.ts, as a server: the step is the number of tool results so far. */
const modelServer =
  (wire: Wire): Fake.Handler =>
  (req, res, recorded) => {
    const step = wire.toolResults(recorded.body).length
    const events = step < calls.length ? wire.toolCall(step) : wire.text(step, FINAL)
    return Fake.sse(events, { gapMs: 1 })(req, res, recorded)
  }

describe("the agent loop end to end, through each provider adapter", () => {
  for (const wire of [openai, anthropic, google, compat]) {
    it.scopedLive(`${wire.spec}: reads, edits, runs the failing test, sees it pass and stops; replays exactly`, () =>
      Effect.gen(function* () {
        const server = yield* Fake.make
        // more handlers than needed: an extra request would be answered, then caught by the count below
        for (let i = 0; i < 8; i++) server.reply(modelServer(wire))
        const repo = makeBuggyRepo()
        const state = fs.mkdtempSync(path.join(os.tmpdir(), "muse-models-state-"))
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            fs.rmSync(repo, { recursive: true, force: true })
            fs.rmSync(state, { recursive: true, force: true })
          })
        )
        const prompter = autoPrompter({ allow: true, scope: "once" })
        const makeProgram = (languageModel: Layer.Layer<LanguageModel.LanguageModel>) =>
          Effect.gen(function* () {
            const agent = yield* Agent.make({ name: "main", instructions: "You fix bugs." })
            return yield* agent.send("The unit test fails. Fix it.")
          }).pipe(
            Effect.provide(
              layerAgentServices({
                languageModel,
                modelName: wire.spec,
                tools: CodingTools.make(),
                workspace: WorkspaceNode.layer(repo).pipe(Layer.orDie),
                approvals: { mode: "auto-edit" },
                prompter: prompter.layer
              })
            )
          )
        const live = Models.layer(wire.spec, {
          env: wire.env,
          baseUrl: server.url + wire.basePath,
          maxRetries: 0,
          timeout: "20 seconds",
          idleTimeout: "20 seconds"
        }).pipe(Layer.orDie)

        const result = yield* Session.run(makeProgram(live)).pipe(
          Effect.provide(EventLogFile.layer({ dir: state, session: "e2e", create: true }))
        )
        expect(result.status).toBe("completed")
        expect(result.text).toBe(FINAL)
        expect(fs.readFileSync(path.join(repo, "sum.js"), "utf8")).toBe("export const sum = (a, b) => a + b\n")
        execFileSync("npm", ["test"], { cwd: repo, stdio: "pipe" })
        expect(prompter.asked.map((r) => [r.tool, r.summary])).toEqual([["run_shell", "npm test"]])

        // the wire: four streamed requests, each carrying one more tool result than the one before
        expect(server.requests).toHaveLength(4)
        for (const req of server.requests) {
          expect(req.method).toBe("POST")
          expect(req.url).toBe(wire.url)
          wire.checkRequest(req)
        }
        expect(server.requests.map((r) => wire.toolResults(r.body).length)).toEqual([0, 1, 2, 3])
        const results = wire.toolResults(server.requests[3]!.body)
        expect(results.map((r) => r.id)).toEqual([0, 1, 2].map(wire.callId))
        expect(results[0]!.value.content).toContain("a - b")
        expect(results[2]!.value.exit_code).toBe(0)

        // the log: the same story as with the scripted model
        const events = yield* EventLogFile.readSession("e2e", { dir: state })
        const story = events
          .filter((e) => !e.type.startsWith("approval."))
          .map((e) => (e.type.startsWith("tool.") ? `${e.type}:${(e.data as any).tool}` : e.type))
        expect(story).toEqual([
          "user.message",
          "prompt.ready",
          "model.requested",
          "model.responded",
          "tool.started:read_file",
          "tool.completed:read_file",
          "model.requested",
          "model.responded",
          "tool.started:edit_file",
          "tool.completed:edit_file",
          "file.changed",
          "model.requested",
          "model.responded",
          "tool.started:run_shell",
          "tool.completed:run_shell",
          "model.requested",
          "model.responded",
          "turn.completed"
        ])
        const responded = events.filter((e) => e.type === "model.responded").map((e) => e.data as any)
        expect(responded.map((d) => d.toolCalls.map((c: any) => [c.name, c.params]))).toEqual([
          ...calls.map((c) => [[c.name, c.params]]),
          []
        ])
        expect(responded.map((d) => d.finishReason)).toEqual(["tool-calls", "tool-calls", "tool-calls", "stop"])
        expect(responded.map((d) => d.text)).toEqual(["", "", "", FINAL])
        expect(responded.map((d) => [d.usage.inputTokens, d.usage.outputTokens, d.usage.totalTokens])).toEqual(
          [0, 1, 2, 3].map((step) => {
            const u = usageAt(step)
            return [u.input, u.output, u.input + u.output]
          })
        )
        const shell = events.find((e) => e.type === "tool.completed" && (e.data as any).tool === "run_shell")!
        expect((shell.data as any).result.exit_code).toBe(0)

        // the recorded session replays exactly, without the server and without touching the repository
        fs.writeFileSync(path.join(repo, "sum.js"), "export const sum = (a, b) => a - b\n")
        const report = yield* Session.replay(makeProgram(Model.layerLanguageModelForbidden), { events, verify: true })
        expect(report.matched).toBe(events.length)
        expect(fs.readFileSync(path.join(repo, "sum.js"), "utf8")).toBe("export const sum = (a, b) => a - b\n")
        expect(server.requests).toHaveLength(4)
      })
    )
  }
})

describe("provider failures through the agent loop", () => {
  it.scopedLive(
    "a call to a tool that does not exist: the model is told which tools there are, with no schema dump",
    () =>
      Effect.gen(function* () {
        const server = yield* Fake.make
        server.reply(
          Fake.sse([
            compatChunk({
              role: "assistant",
              content: null,
              tool_calls: [{ id: "call_0", index: 0, type: "function", function: { name: "rm_rf", arguments: "{}" } }]
            }),
            compatChunk({}, "tool_calls"),
            DONE
          ]),
          Fake.sse([
            compatChunk({ role: "assistant", content: "" }),
            compatChunk({ content: "ok" }),
            compatChunk({}, "stop"),
            DONE
          ])
        )
        const repo = makeBuggyRepo()
        const live = Models.layer("ollama/llama3.2", { env: {}, baseUrl: `${server.url}/v1`, maxRetries: 0 }).pipe(
          Layer.orDie
        )
        const result = yield* Effect.gen(function* () {
          const agent = yield* Agent.make({ name: "main", instructions: "You fix bugs." })
          return yield* agent.send("fix it")
        }).pipe(
          Effect.provide(
            layerAgentServices({
              languageModel: live,
              modelName: "ollama/llama3.2",
              tools: CodingTools.make(),
              workspace: WorkspaceNode.layer(repo).pipe(Layer.orDie)
            })
          ),
          Session.run,
          Effect.provide(
            EventLogFile.layer({
              dir: fs.mkdtempSync(path.join(os.tmpdir(), "muse-models-state-")),
              session: "u",
              create: true
            })
          )
        )
        expect(result.status).toBe("completed")
        expect(server.requests).toHaveLength(2)
        const retry = (server.requests[1]!.body.messages as Array<{ role: string; content: unknown }>).at(-1)!
        expect(retry.role).toBe("user")
        expect(String(retry.content)).toBe(
          'Your previous reply could not be used: the reply called a tool named "rm_rf", which does not exist. Available tools: read_file, write_file, edit_file, list_files, grep, run_shell. Reply again.'
        )
      })
  )
})
