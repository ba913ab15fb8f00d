/**
 * A custom coding agent composed from MuseKit packages: a model from a `provider/model` string, the durable file
 * event log, the Node coding tools over a workspace, and one plugin (compaction).
 *
 * @example
 * ```ts
 * import { runAgent } from "./agent.js"
 *
 * const result = await runAgent({ task: "make the tests pass", dir: "/path/to/repo", model: "ollama/qwen2.5-coder" })
 * ```
 */
import type { LanguageModel } from "@effect/ai"
import { Agent, Approvals, Model, Plugin, Session } from "@musekit/core"
import { ModelInfo, Models } from "@musekit/models"
import { CodingTools, EventLogFile, HttpClientNode, ShellParser, WorkspaceNode } from "@musekit/node"
import { CompactionPlugin } from "@musekit/plugin-compaction"
import { Effect, Layer } from "effect"

export interface Options {
  readonly task: string
  /** The repository the agent works in. */
  readonly dir: string
  /** `provider/model`, e.g. `anthropic/claude-sonnet-4-5`; ignored when `languageModel` is given. */
  readonly model: string
  readonly languageModel?: Layer.Layer<LanguageModel.LanguageModel> | undefined
  /** Where sessions are kept (default: MuseKit's state directory). */
  readonly stateDir?: string | undefined
  readonly onText?: ((delta: string) => void) | undefined
}

export const runAgent = (options: Options) => {
  // (over Node's http with keep-alive; `Models.layer` would use the runtime's fetch)
  const languageModel =
    options.languageModel ??
    Models.layerWithoutHttpClient(options.model, { env: process.env }).pipe(
      Layer.provide(HttpClientNode.layer),
      Layer.orDie
    )
  const services = Layer.mergeAll(
    Model.layer(options.model).pipe(Layer.provide(languageModel)),
    CodingTools.layer(),
    WorkspaceNode.layer(options.dir).pipe(Layer.orDie),
    Approvals.layer({
      mode: "auto-edit",
      rules: [{ tool: "run_shell", pattern: "npm test*", action: "allow", scope: "session" }],
      // rules match the parsed command, so `npm test; rm -rf ~` is not let through
      shell: ShellParser.parser
    }),
    Approvals.layerPrompterDeny,
    Plugin.layer([CompactionPlugin.make({ contextWindow: (m) => ModelInfo.contextWindow(m) })])
  )
  const program = Effect.gen(function* () {
    const agent = yield* Agent.make({ name: "main", instructions: "You are a careful coding agent. Run the tests." })
    return yield* agent.send(options.task, {
      onText: (d) => Effect.sync(() => options.onText?.(d)),
      budget: { turns: 30 }
    })
  }).pipe(Effect.provide(services))
  const session = EventLogFile.newSessionId()
  return Effect.runPromise(
    Session.run(program).pipe(
      Effect.provide(EventLogFile.layer({ dir: options.stateDir, session, create: true })),
      Effect.map((result) => ({ ...result, session }))
    )
  )
}
