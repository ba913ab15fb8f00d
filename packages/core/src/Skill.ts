/**
 * Skills: named, user-invocable procedures (`/plan`, `/grill`, `/goal`, or a third party's).
 *
 * A skill has a name, a description, an argument schema and a `run` effect that may use the
 * agent's services. Skills also come from `SKILL.md` files (loaded by `@musekit/plugin-skills`);
 * those carry instructions for the model instead of code. The `Skill` type and `SkillError` are
 * declared in `Contract` (beneath the agent loop and the crew, which `SkillContext` names) and
 * re-exported here.
 *
 * @example
 * ```ts
 * import { Skill } from "@musekit/core"
 * import { Effect, Schema } from "effect"
 *
 * const hello = Skill.make({
 *   name: "hello",
 *   description: "Greets",
 *   args: Schema.String,
 *   run: (who) => Effect.succeed(`hello ${who}`)
 * })
 * ```
 */
import { Context, Effect, Layer, ParseResult, Schema } from "effect"
import type * as Agent from "./Agent.js"
import { type Skill, SkillError } from "./Contract.js"
import type * as Crew from "./Crew.js"
import type * as Recorder from "./Recorder.js"

export type { Skill } from "./Contract.js"
export { SkillError } from "./Contract.js"

export const make = <A, R>(options: {
  readonly name: string
  readonly description: string
  readonly args?: Schema.Schema<A, string, never> | undefined
  readonly run: (args: A) => Effect.Effect<unknown, SkillError | Recorder.RecorderError, R>
  readonly instructions?: string | undefined
  readonly source?: string | undefined
}): Skill<A, R> => {
  if (!/^[a-z0-9][a-z0-9-]{0,63}$/.test(options.name)) {
    throw new Error(`skill name "${options.name}" must be lowercase letters, digits and '-'`)
  }
  return {
    name: options.name,
    description: options.description,
    args: (options.args ?? Schema.String) as Schema.Schema<A, string, never>,
    run: options.run,
    instructions: options.instructions,
    source: options.source
  }
}

/** Parse `/name rest of line` into a name and argument text. */
export const parseInvocation = (input: string): { readonly name: string; readonly args: string } | undefined => {
  const m = /^\/([a-z0-9][a-z0-9-]*)(?:\s+([\s\S]*))?$/.exec(input.trim())
  return m ? { name: m[1]!, args: (m[2] ?? "").trim() } : undefined
}

export interface Service {
  readonly list: Effect.Effect<ReadonlyArray<Skill>>
  readonly get: (name: string) => Effect.Effect<Skill | undefined>
  readonly register: (skill: Skill) => Effect.Effect<void>
  /** Run `/name args`; unknown names and bad arguments are `SkillError`s. */
  readonly invoke: (input: string) => Effect.Effect<unknown, SkillError | Recorder.RecorderError, SkillContext>
}

export class Skills extends Context.Tag("@musekit/core/Skills")<Skills, Service>() {}

export const makeRegistry = (initial: ReadonlyArray<Skill> = []): Service => {
  const skills = new Map<string, Skill>()
  for (const s of initial) skills.set(s.name, s)
  const get = (name: string) => Effect.sync(() => skills.get(name))
  return {
    list: Effect.sync(() => [...skills.values()].sort((a, b) => a.name.localeCompare(b.name))),
    get,
    register: (skill) => Effect.sync(() => void skills.set(skill.name, skill)),
    invoke: (input) =>
      Effect.gen(function* () {
        const inv = parseInvocation(input)
        if (!inv) return yield* new SkillError({ skill: "?", message: `not a skill invocation: ${input}` })
        const skill = skills.get(inv.name)
        if (!skill) {
          return yield* new SkillError({
            skill: inv.name,
            message: `unknown skill /${inv.name}; known: ${[...skills.keys()].map((k) => `/${k}`).join(", ") || "none"}`
          })
        }
        const args = yield* Schema.decode(skill.args)(inv.args).pipe(
          Effect.mapError(
            (e) =>
              new SkillError({
                skill: skill.name,
                message: `bad arguments for /${skill.name}: ${ParseResult.TreeFormatter.formatErrorSync(e)}`
              })
          )
        )
        return yield* skill.run(args)
      })
  }
}

export const layer = (skills: ReadonlyArray<Skill> = []): Layer.Layer<Skills> =>
  Layer.sync(Skills, () => makeRegistry(skills))

/** What a running skill may use: the agent it runs for, the crew, and the user's screen. */
export interface ContextService {
  readonly agent: Agent.Agent
  readonly crew?: Crew.Service | undefined
  /** Show text to the user (not recorded; the recorded story is in the events). */
  readonly output: (text: string) => Effect.Effect<void>
  /** Options for the agent's turns (streaming callbacks, budget). */
  readonly sendOptions?: Agent.SendOptions | undefined
}

export class SkillContext extends Context.Tag("@musekit/core/SkillContext")<SkillContext, ContextService>() {}
