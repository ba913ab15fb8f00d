import { describe, expect, it } from "@effect/vitest"
import { Context, Deferred, Effect, Layer, Schema } from "effect"
import {
  Agent,
  type Approvals,
  Event,
  EventLog,
  Model,
  Plugin,
  Recorder,
  Redactor,
  Session,
  Tools
} from "../src/index.js"
import { autoPrompter, layerAgentServices, routed, Scripted, scriptedModel, type Turn } from "../src/testing.js"

/** A tiny in-memory "file system" tool pair, so the loop can be tested without Node. */
const makeNotes = (store: Map<string, string>, calls: Array<string>) => [
  Tools.make({
    name: "read_note",
    description: "Read a note",
    parameters: { name: Schema.String },
    effect: "read",
    handler: ({ name }) =>
      Effect.suspend(() => {
        calls.push(`read ${name}`)
        const v = store.get(name)
        return v === undefined
          ? Effect.fail(new Tools.ToolError({ message: `no note ${name}` }))
          : Effect.succeed({ text: v })
      })
  }),
  Tools.make({
    name: "write_note",
    description: "Write a note",
    parameters: { name: Schema.String, text: Schema.String },
    effect: "write",
    summarize: ({ name }) => `write ${name}`,
    handler: ({ name, text }) =>
      Effect.sync(() => {
        calls.push(`write ${name}`)
        store.set(name, text)
        return { ok: true }
      })
  })
]

const script: ReadonlyArray<Turn> = [
  Scripted.toolCalls([{ name: "read_note", params: { name: "todo" } }]),
  Scripted.toolCalls([{ id: "w1", name: "write_note", params: { name: "todo", text: "done" } }], { text: "Updating." }),
  Scripted.text("All done.")
]

const program = (
  options: {
    script?: ReadonlyArray<Turn>
    store?: Map<string, string>
    calls?: Array<string>
    approvals?: Approvals.Policy
    prompter?: Layer.Layer<Approvals.Prompter>
    plugins?: ReadonlyArray<Plugin.PluginInput>
    budget?: Agent.Budget
    languageModel?: Layer.Layer<any>
    task?: string
    contextWindow?: number
  } = {}
) => {
  const store = options.store ?? new Map([["todo", "write tests"]])
  return Effect.gen(function* () {
    const agent = yield* Agent.make({ name: "main", instructions: "You keep notes.", budget: options.budget })
    return yield* agent.send(options.task ?? "finish the todo")
  }).pipe(
    Effect.provide(
      layerAgentServices({
        script: options.script ?? script,
        languageModel: options.languageModel,
        tools: makeNotes(store, options.calls ?? []),
        approvals: options.approvals,
        prompter: options.prompter,
        plugins: options.plugins,
        contextWindow: options.contextWindow
      })
    )
  )
}

const runLive = <A, E>(p: Effect.Effect<A, E, any>, log = EventLog.layerMemory("t")) =>
  Effect.gen(function* () {
    const result = yield* Session.run(p)
    const events = yield* EventLog.readAll(yield* EventLog.EventLog)
    return { result, events }
  }).pipe(Effect.provide(log)) as Effect.Effect<{ result: A; events: ReadonlyArray<Event.Envelope> }, E>

describe("Agent loop", () => {
  it.effect("runs model → tools → model until the model stops, recording every step in order", () =>
    Effect.gen(function* () {
      const store = new Map([["todo", "write tests"]])
      const { result, events } = yield* runLive(program({ store }))
      expect(result.status).toBe("completed")
      expect(result.text).toBe("All done.")
      expect(result.steps).toBe(3)
      expect(result.toolCalls).toBe(2)
      expect(store.get("todo")).toBe("done")
      expect(events.map((e) => e.type)).toEqual([
        "user.message",
        "prompt.ready",
        "model.requested",
        "model.responded",
        "approval.decided",
        "tool.started",
        "tool.completed",
        "model.requested",
        "model.responded",
        "approval.decided",
        "tool.started",
        "tool.completed",
        "model.requested",
        "model.responded",
        "turn.completed"
      ])
      // intent before outcome, linked by parent
      const started = events.find((e) => e.type === "tool.started")!
      const completed = events.find((e) => e.type === "tool.completed")!
      expect(completed.parent).toBe(started.id)
      expect(completed.data).toMatchObject({ isFailure: false, result: { text: "write tests" } })
      // requests record only what is new
      const requests = events.filter((e) => e.type === "model.requested").map((e) => e.data as any)
      expect(requests.map((r) => [r.keep, r.appended.length, r.messages])).toEqual([
        [0, 1, 1],
        [1, 2, 3],
        [3, 2, 5]
      ])
      const usage = events.filter((e) => e.type === "model.responded").map((e) => (e.data as any).usage.inputTokens)
      expect(usage).toEqual([100, 100, 100])
    })
  )

  it.effect("streams text to the caller as it arrives", () =>
    Effect.gen(function* () {
      const deltas: Array<string> = []
      const p = Effect.gen(function* () {
        const agent = yield* Agent.make({ name: "main", instructions: "x" })
        return yield* agent.send("hi", { onText: (d) => Effect.sync(() => deltas.push(d)) })
      }).pipe(Effect.provide(layerAgentServices({ script: [Scripted.text("one two three")] })))
      yield* runLive(p)
      expect(deltas).toEqual(["one ", "two ", "three"])
    })
  )

  it.effect("text streamed before an error part reaches the caller, and the error is the model's failure", () =>
    Effect.gen(function* () {
      const deltas: Array<string> = []
      const sm = scriptedModel([
        [{ type: "text", text: "half a reply" }, { type: "error", error: "overloaded" } as any],
        Scripted.text("ok")
      ])
      const p = Effect.gen(function* () {
        const agent = yield* Agent.make({ name: "main", instructions: "x" })
        return yield* agent.send("hi", { onText: (d) => Effect.sync(() => deltas.push(d)) })
      }).pipe(Effect.provide(layerAgentServices({ languageModel: sm.layer })))
      const { events } = yield* runLive(p)
      expect(deltas.slice(0, 3)).toEqual(["half ", "a ", "reply"])
      const failed = events.find((e) => e.type === "model.failed")
      expect(failed?.data).toMatchObject({ malformed: false, error: expect.stringContaining("overloaded") })
    })
  )

  it.effect("a reply calling an unknown tool is recorded as malformed and the model is asked again", () =>
    Effect.gen(function* () {
      const sm = scriptedModel([
        Scripted.toolCalls([{ id: "c", name: "no_such_tool", params: {} }]),
        Scripted.text("ok")
      ])
      const { result, events } = yield* runLive(program({ languageModel: sm.layer }))
      expect(result.status).toBe("completed")
      const failed = events.find((e) => e.type === "model.failed")!
      expect(failed.data).toMatchObject({
        malformed: true,
        error: 'the reply called a tool named "no_such_tool", which does not exist'
      })
      const retry = sm.prompts[1]!.content.at(-1) as any
      expect(retry.content[0].text).toBe(
        'Your previous reply could not be used: the reply called a tool named "no_such_tool", which does not exist. Available tools: read_note, write_note. Reply again.'
      )
    })
  )

  it.effect("a failing tool and malformed arguments go back to the model; the loop goes on", () =>
    Effect.gen(function* () {
      const sm = scriptedModel([
        Scripted.toolCalls([
          { id: "a", name: "read_note", params: { name: "missing" } },
          { id: "b", name: "write_note", params: { name: 42 } }
        ]),
        Scripted.text("ok")
      ])
      const { result, events } = yield* runLive(program({ languageModel: sm.layer }))
      expect(result.reason).toBeUndefined()
      expect(result.status).toBe("completed")
      const toolMessage = sm.prompts[1]!.content.find((m) => m.role === "tool")!
      const parts = (toolMessage as any).content as Array<any>
      expect(parts.map((p) => [p.id, p.isFailure])).toEqual([
        ["a", true],
        ["b", true]
      ])
      expect(parts[0].result).toEqual({ error: "no note missing" })
      expect(parts[1].result.error).toContain("invalid arguments for write_note")
      expect(parts[1].result.error).toContain("text")
      expect(events.filter((e) => e.type === "tool.rejected")).toHaveLength(1)
    })
  )

  it.effect("deny rules refuse the call and name the rule", () =>
    Effect.gen(function* () {
      const calls: Array<string> = []
      const sm = scriptedModel(script)
      const { events } = yield* runLive(
        program({
          calls,
          languageModel: sm.layer,
          approvals: { mode: "auto", rules: [{ tool: "write_*", action: "deny", scope: "project" }] }
        })
      )
      expect(calls).toEqual(["read todo"])
      const decided = events.filter((e) => e.type === "approval.decided").map((e) => e.data as any)
      expect(decided[1]).toMatchObject({ allow: false, by: "rule", rule: "deny write_* (project)" })
      const last = sm.prompts[2]!.content.filter((m) => m.role === "tool").at(-1) as any
      expect(last.content[0].result.error).toContain("denied by rule deny write_* (project)")
    })
  )

  it.effect("ask mode goes through the prompter and records question, answer and decision", () =>
    Effect.gen(function* () {
      const prompter = autoPrompter({ allow: true, scope: "session" })
      const { events } = yield* runLive(program({ approvals: { mode: "ask" }, prompter: prompter.layer }))
      expect(prompter.asked.map((r) => [r.tool, r.summary])).toEqual([["write_note", "write todo"]])
      const types = events.map((e) => e.type)
      const i = types.indexOf("approval.requested")
      expect(types.slice(i, i + 4)).toEqual([
        "approval.requested",
        "approval.answered",
        "approval.decided",
        "tool.started"
      ])
      expect(events[i + 2]!.data).toMatchObject({ allow: true, by: "user", scope: "session" })
    })
  )

  it.effect("an approval preview is recorded as an observation, so a later replay does not depend on the files", () =>
    Effect.gen(function* () {
      const store = new Map([["todo", "write tests"]])
      const withPreview = makeNotes(store, []).map((d) =>
        d.name === "write_note"
          ? { ...d, preview: (p: any) => Effect.sync(() => `- ${store.get(p.name) ?? ""}\n+ ${p.text}`) }
          : d
      )
      const prompter = autoPrompter({ allow: true, scope: "once" })
      const build = (lm: Layer.Layer<any>) =>
        Effect.gen(function* () {
          const agent = yield* Agent.make({ name: "main", instructions: "You keep notes." })
          return yield* agent.send("finish the todo")
        }).pipe(
          Effect.provide(
            layerAgentServices({
              languageModel: lm,
              tools: withPreview,
              approvals: { mode: "ask" },
              prompter: prompter.layer
            })
          )
        )
      const { events } = yield* runLive(build(scriptedModel(script).layer))
      expect(prompter.asked[0]!.preview).toBe("- write tests\n+ done")
      const asked = events.find((e) => e.type === "approval.requested")!
      expect((asked.data as any).observed).toEqual({ preview: "- write tests\n+ done" })
      // the note has changed since: the preview would differ now, the replay must not care
      expect(store.get("todo")).toBe("done")
      const report = yield* Session.replay(build(Model.layerLanguageModelForbidden), { events, verify: true })
      expect(report.matched).toBe(events.length)
    })
  )

  it.effect("read-only mode refuses writes without asking", () =>
    Effect.gen(function* () {
      const prompter = autoPrompter()
      const store = new Map([["todo", "x"]])
      yield* runLive(program({ store, approvals: { mode: "read-only" }, prompter: prompter.layer }))
      expect(prompter.asked).toHaveLength(0)
      expect(store.get("todo")).toBe("x")
    })
  )

  it.effect("stops with status budget when the turn budget is exhausted", () =>
    Effect.gen(function* () {
      const loop = [Scripted.toolCalls([{ name: "read_note", params: { name: "todo" } }])]
      const { result, events } = yield* runLive(program({ script: loop, budget: { turns: 4 } }))
      expect(result.status).toBe("budget")
      expect(result.reason).toBe("turn budget of 4 model calls reached")
      expect(events.filter((e) => e.type === "model.requested")).toHaveLength(4)
      expect(events[events.length - 1]!.data).toMatchObject({ status: "budget" })
    })
  )

  it.effect("a token budget is checked against recorded usage", () =>
    Effect.gen(function* () {
      const loop = [Scripted.toolCalls([{ name: "read_note", params: { name: "todo" } }], { input: 1000, output: 10 })]
      const { result } = yield* runLive(program({ script: loop, budget: { tokens: 2500 } }))
      expect(result.status).toBe("budget")
      expect(result.steps).toBe(3)
    })
  )

  it.effect("a large tool result goes to the blob store; the model still sees all of it, and it replays", () =>
    Effect.gen(function* () {
      const big = "lorem ipsum ".repeat(4_000) // 48 KB, over the 32 KiB kept inline
      const sm = scriptedModel([
        Scripted.toolCalls([{ name: "read_note", params: { name: "big" } }]),
        Scripted.text("read it")
      ])
      yield* Session.run(program({ languageModel: sm.layer, store: new Map([["big", big]]) }))
      const log = yield* EventLog.EventLog
      const events = yield* EventLog.readAll(log)
      const completed = events.find((e) => e.type === "tool.completed")!
      expect(completed.data).toMatchObject({ isFailure: false, blob: expect.stringMatching(/^[0-9a-f]{64}$/) })
      expect(Event.encodeLine(completed).length).toBeLessThan(2_000)
      const tool = sm.prompts[1]!.content.find((m) => m.role === "tool") as any
      expect(tool.content[0].result).toEqual({ text: big })
      const report = yield* Session.replay(program({ languageModel: Model.layerLanguageModelForbidden }), {
        events,
        verify: true,
        getBlob: log.getBlob
      })
      expect(report.matched).toBe(events.length)
    }).pipe(Effect.provide(EventLog.layerMemory("big")))
  )

  it.effect(
    "with the model's window known, a large result reaches the model cut to its budget; the log keeps all",
    () =>
      Effect.gen(function* () {
        const big = "lorem ipsum ".repeat(4_000) // 48 KB: more than a tenth of a 32k-token window
        const sm = scriptedModel([
          Scripted.toolCalls([{ name: "read_note", params: { name: "big" } }]),
          Scripted.text("read it")
        ])
        const run = (languageModel: Layer.Layer<any>) =>
          program({ languageModel, store: new Map([["big", big]]), contextWindow: 32_768 })
        yield* Session.run(run(sm.layer))
        const log = yield* EventLog.EventLog
        const events = yield* EventLog.readAll(log)
        const completed = events.find((e) => e.type === "tool.completed")!
        const stored = JSON.parse(new TextDecoder().decode(yield* log.getBlob((completed.data as any).blob)))
        expect(stored).toEqual({ text: big })
        const seen = (sm.prompts[1]!.content.find((m) => m.role === "tool") as any).content[0].result
        const budget = Tools.resultBudget(32_768)
        expect(budget.tokens).toBe(3_276)
        expect(Tools.jsonBytes(seen)).toBeLessThanOrEqual(budget.bytes)
        expect(seen.note).toMatch(/^this result is 47 KiB, more than the 3,276-token budget of one tool result/)
        expect(big.startsWith(JSON.parse(`${seen.start}"}`).text)).toBe(true)
        const report = yield* Session.replay(run(Model.layerLanguageModelForbidden), {
          events,
          verify: true,
          getBlob: log.getBlob
        })
        expect(report.matched).toBe(events.length)
      }).pipe(Effect.provide(EventLog.layerMemory("fit")))
  )

  it.effect("a routed script keeps its place when a compaction folds the earlier replies away", () =>
    Effect.gen(function* () {
      // a stand-in for compaction: before each model call keep only the first user message and the
      // newest reply with its results
      const folding = Plugin.make({
        name: "fold",
        hooks: {
          transformContext: (input) =>
            Effect.succeed(
              input.messages.length > 3 ? [input.messages[0]!, ...input.messages.slice(-2)] : input.messages
            )
        }
      })
      const script = routed({
        main: ({ turn }) =>
          turn < 4 ? Scripted.toolCalls([{ name: "read_note", params: { name: "todo" } }]) : Scripted.text("done")
      })
      const sm = scriptedModel([script])
      const { result } = yield* runLive(program({ languageModel: sm.layer, plugins: [folding], budget: { turns: 10 } }))
      expect(result).toMatchObject({ status: "completed", steps: 5, text: "done" })
    })
  )

  it.effect("secrets in tool output never reach the log", () =>
    Effect.gen(function* () {
      const secret = "sk-live-THISISASECRETKEY123456"
      const store = new Map([["todo", `the key is ${secret}`]])
      const log = EventLog.layerMemory("t", { redactor: Redactor.make({ secrets: { OPENAI_API_KEY: secret } }) })
      const { events } = yield* runLive(program({ store }), log)
      const all = events.map((e) => Event.encodeLine(e)).join("\n")
      expect(all).not.toContain(secret)
      expect(all).toContain("[REDACTED:OPENAI_API_KEY]")
      // and the redacted log still replays exactly (the replay sees the redacted tool output)
      const report = yield* Session.replay(
        program({ store: new Map(), languageModel: Model.layerLanguageModelForbidden }),
        {
          events,
          verify: true,
          redactor: Redactor.make({ secrets: { OPENAI_API_KEY: secret } })
        }
      )
      expect(report.matched).toBe(events.length)
    })
  )

  it.effect("a plugin written against the public API adds a tool and a hook", () =>
    Effect.gen(function* () {
      const seen: Array<string> = []
      const plugin = Plugin.make({
        name: "shout",
        tools: [
          Tools.make({
            name: "shout",
            description: "Upper-case a text",
            parameters: { text: Schema.String },
            effect: "read",
            handler: ({ text }) => Effect.succeed(text.toUpperCase())
          })
        ],
        hooks: {
          beforeToolCall: (call) => Effect.sync(() => void seen.push(call.tool)).pipe(Effect.as(undefined)),
          afterToolCall: (call) =>
            Effect.succeed(call.tool === "shout" ? { ...call.result, result: `${call.result.result}!` } : call.result)
        }
      })
      const sm = scriptedModel([
        Scripted.toolCalls([{ name: "shout", params: { text: "hey" } }]),
        Scripted.text("done")
      ])
      yield* runLive(program({ languageModel: sm.layer, plugins: [plugin] }))
      expect(seen).toEqual(["shout"])
      const tool = sm.prompts[1]!.content.find((m) => m.role === "tool") as any
      expect(tool.content[0].result).toBe("HEY!")
    })
  )

  it.effect("Plugin.layer flattens, drops falsy entries and lets the last plugin of a name win", () =>
    Effect.gen(function* () {
      const a1 = Plugin.make({
        name: "a",
        roles: [{ name: "r1", description: "", instructions: "", tools: "*", writes: false }]
      })
      const a2 = Plugin.make({
        name: "a",
        roles: [{ name: "r2", description: "", instructions: "", tools: "*", writes: false }]
      })
      const b = Plugin.make({ name: "b" })
      expect(Plugin.normalize([a1, [false, b, null, [a2]], undefined]).map((p) => p.name)).toEqual(["b", "a"])
      const reg = yield* Plugin.Plugins.pipe(Effect.provide(Plugin.layer([a1, [false, b, [a2]]])))
      expect(reg.roles.map((r) => r.name)).toEqual(["r2"])
    })
  )

  it.effect("a plugin's hooks run with what its layer provides and the session's recorder", () =>
    Effect.gen(function* () {
      class Greeting extends Context.Tag("test/Greeting")<Greeting, { readonly word: string }>() {}
      const seen: Array<string> = []
      const plugin = Plugin.make({
        name: "greeter",
        layer: Layer.succeed(Greeting, { word: "hello" }),
        hooks: {
          transformPrompt: (input) =>
            Effect.gen(function* () {
              const { word } = yield* Greeting
              const rec = yield* Recorder.Recorder
              seen.push(rec.mode)
              return { ...input, content: [...input.content, { type: "text" as const, text: word }] }
            })
        }
      })
      const sm = scriptedModel([Scripted.text("ok")])
      yield* runLive(program({ languageModel: sm.layer, plugins: [plugin] }))
      const user = sm.prompts[0]!.content.find((m) => m.role === "user") as any
      expect(user.content.map((p: any) => p.text)).toEqual(["finish the todo", "hello"])
      expect(seen).toEqual(["live"])
    })
  )

  it("a hook that needs a service its plugin does not provide does not compile", () => {
    class Missing extends Context.Tag("test/Missing")<Missing, { readonly n: number }>() {}
    class Provided extends Context.Tag("test/Provided")<Provided, { readonly n: number }>() {}
    const needsMissing = (input: Plugin.PromptInput) => Effect.as(Missing, input)
    const plugin = Plugin.make({
      name: "lacking",
      layer: Layer.succeed(Provided, { n: 1 }),
      // @ts-expect-error -- `Missing` is neither provided by the plugin's layer nor part of `HookContext`
      hooks: { transformPrompt: needsMissing }
    })
    // @ts-expect-error -- without a layer, a hook may need only `HookContext`
    const bare = Plugin.make({ name: "bare", hooks: { transformPrompt: needsMissing } })
    // @ts-expect-error -- a plugin written as a value is checked the same way
    const literal: Plugin.Plugin = { name: "literal", hooks: { transformPrompt: needsMissing } }
    const fine = Plugin.make({
      name: "fine",
      layer: Layer.succeed(Provided, { n: 1 }),
      hooks: { transformPrompt: (input) => Effect.as(Effect.zip(Provided, Recorder.Recorder), input) }
    })
    const toolNeeding = <R>(service: Context.Tag<R, { readonly n: number }>) =>
      Tools.make({
        name: "count",
        description: "A number from a service",
        parameters: {},
        effect: "read",
        handler: () => Effect.map(service, (s) => s.n)
      })
    // a plugin's tools are checked like its hooks
    const providing = Layer.succeed(Provided, { n: 1 })
    const tooled = Plugin.make({ name: "tooled", layer: providing, tools: [toolNeeding(Provided)] })
    // a layer built inline by a generic constructor, next to tools made elsewhere: name its services
    const named = Plugin.make<Provided>({
      name: "named",
      layer: Layer.succeed(Provided, { n: 1 }),
      tools: [toolNeeding(Provided)]
    })
    // @ts-expect-error -- the tool needs `Missing`, which the plugin does not provide
    const untooled = Plugin.make({ name: "untooled", tools: [toolNeeding(Missing)] })
    // @ts-expect-error -- the tools of `Tools.layer` need nothing
    const layered = Tools.layer([toolNeeding(Provided)])
    expect([plugin, bare, literal, fine, tooled, named, untooled].map((p) => p.name)).toEqual([
      "lacking",
      "bare",
      "literal",
      "fine",
      "tooled",
      "named",
      "untooled"
    ])
    expect(layered).toBeDefined()
  })

  it.effect("a Promise-based plugin works without Effect", () =>
    Effect.gen(function* () {
      const plugin = Plugin.fromPromises({
        name: "promised",
        tools: [
          {
            name: "add",
            description: "Add two numbers",
            parameters: { a: Schema.Number, b: Schema.Number },
            effect: "read",
            handler: async ({ a, b }) => a + b
          }
        ],
        hooks: {
          transformPrompt: async (input) => ({
            ...input,
            content: [...input.content, { type: "text", text: "(be brief)" }]
          })
        }
      })
      const sm = scriptedModel([Scripted.toolCalls([{ name: "add", params: { a: 2, b: 3 } }]), Scripted.text("5")])
      yield* runLive(program({ languageModel: sm.layer, plugins: [plugin] }))
      const user = sm.prompts[0]!.content.find((m) => m.role === "user") as any
      expect(user.content.map((p: any) => p.text)).toEqual(["finish the todo", "(be brief)"])
      const tool = sm.prompts[1]!.content.find((m) => m.role === "tool") as any
      expect(tool.content[0].result).toBe(5)
    })
  )
})

describe("Agent loop: when a tool call waits for its intent to be durable", () => {
  /**
   * A log whose commit of a batch holding a `tool.started` waits until the tool's handler opens the
   * gate (or a second passes, so a call that waits is not stuck): the handler notes whether its intent
   * was stored when it ran.
   */
  const callWith = (tool: Tools.Definition) =>
    Effect.gen(function* () {
      const gate = yield* Deferred.make<void>()
      const base = yield* EventLog.memoryBackend()
      const backend: EventLog.Backend = {
        ...base,
        commit: (batch) =>
          Effect.zipRight(
            batch.some((c) => c.event.type === "tool.started")
              ? // (the committer cannot be interrupted: the timer opens the gate from outside)
                Effect.zipRight(
                  Effect.forkDaemon(Effect.zipRight(Effect.sleep("1 second"), Deferred.succeed(gate, undefined))),
                  Deferred.await(gate)
                )
              : Effect.void,
            base.commit(batch)
          )
      }
      const seen: Array<boolean> = []
      const wrapped: Tools.Definition = {
        ...tool,
        handler: (params, ctx) =>
          Effect.sync(() => seen.push(base.events.some((e) => e.type === "tool.started"))).pipe(
            Effect.zipRight(Deferred.succeed(gate, undefined)),
            Effect.zipRight(tool.handler(params, ctx))
          )
      }
      const log = Layer.scoped(EventLog.EventLog, EventLog.make(backend, { sessionId: "gated" }))
      const result = yield* Session.run(
        Effect.flatMap(Agent.make({ name: "main", instructions: "Look." }), (agent) => agent.send("look")).pipe(
          Effect.provide(
            layerAgentServices({
              script: [Scripted.toolCalls([{ id: "c1", name: tool.name, params: {} }]), Scripted.text("Seen.")],
              tools: [wrapped]
            })
          )
        )
      ).pipe(Effect.provide(log))
      expect(result.status).toBe("completed")
      return seen
    })

  it.live("a read tool of this process's own code (durableIntent: false) runs before its intent is stored", () =>
    Effect.gen(function* () {
      const own = Tools.make({
        name: "look",
        description: "Look",
        parameters: {},
        effect: "read",
        durableIntent: false,
        handler: () => Effect.succeed("ok")
      })
      expect(yield* callWith(own)).toEqual([false])
    })
  )

  it.live("a tool that is 'read' on another process's word (an MCP server's hints) waits for its intent", () =>
    Effect.gen(function* () {
      // built as the MCP plugin builds a server's tool that says readOnlyHint and not openWorldHint
      const claimed = Tools.fromJsonSchema({
        name: "mcp__srv__look",
        description: "Look",
        jsonSchema: { type: "object" },
        validate: () => undefined,
        effect: "read",
        handler: () => Effect.succeed("ok")
      })
      expect(yield* callWith(claimed)).toEqual([true])
      // and a write never skips the wait, whatever it says
      const write = Tools.make({
        name: "put",
        description: "Put",
        parameters: {},
        effect: "write",
        durableIntent: false,
        handler: () => Effect.succeed("ok")
      })
      expect(yield* callWith(write)).toEqual([true])
    })
  )
})
