/**
 * A third-party skill plugin for MuseKit, written against `@musekit/core` only.
 *
 * `/tldr <path> [--bullets N]` asks the agent the skill runs for to read a file and summarize it
 * in N bullet points (default 3), shows the summary to the user and records it as a
 * `tldr.summarized` event, so the session log — and its replay — hold the result.
 *
 * @example
 * ```ts
 * import { Plugin } from "@musekit/core"
 * import { TldrPlugin } from "@musekit/example-skill-plugin"
 *
 * const plugins = Plugin.layer([TldrPlugin.make({ defaultBullets: 5 })])
 * ```
 */
import { Plugin, Recorder, Skill } from "@musekit/core"
import { Effect, ParseResult, Schema } from "effect"

export interface TldrArgs {
  readonly path: string
  readonly bullets: number
}

export interface Options {
  /** Bullet points when `--bullets` is not given (default 3). */
  readonly defaultBullets?: number | undefined
}

export const usage = "/tldr <path> [--bullets N]"

/** The text after `/tldr` → `{ path, bullets }`; a bad argument is a message naming the usage. */
export const argsSchema = (defaultBullets = 3): Schema.Schema<TldrArgs, string> =>
  Schema.transformOrFail(Schema.String, Schema.Struct({ path: Schema.String, bullets: Schema.Int }), {
    strict: true,
    decode: (text, _, ast) => {
      const m = /^(.*?)(?:\s+--bullets\s+(\S+))?$/.exec(text.trim())
      const path = m?.[1]?.trim() ?? ""
      const bullets = m?.[2] === undefined ? defaultBullets : Number(m[2])
      if (path === "") return ParseResult.fail(new ParseResult.Type(ast, text, `give a file. Usage: ${usage}`))
      if (!Number.isInteger(bullets) || bullets < 1 || bullets > 10) {
        return ParseResult.fail(new ParseResult.Type(ast, text, "--bullets must be a whole number from 1 to 10"))
      }
      return ParseResult.succeed({ path, bullets })
    },
    encode: ({ path, bullets }) => ParseResult.succeed(`${path} --bullets ${bullets}`)
  })

/** The `/tldr` skill. */
export const tldr = (options: Options = {}) =>
  Skill.make({
    name: "tldr",
    description: `Summarize a file in a few bullet points. ${usage}`,
    source: "@musekit/example-skill-plugin",
    args: argsSchema(options.defaultBullets),
    // fails with SkillError for the user; the recorder's errors (a divergence on replay) pass through
    run: ({ path, bullets }: TldrArgs) =>
      Effect.gen(function* () {
        const ctx = yield* Skill.SkillContext
        const result = yield* ctx.agent.send(
          `Read ${path} with read_file and summarize it in exactly ${bullets} bullet points, each a line starting with "- ". Reply with the bullet points only.`,
          ctx.sendOptions
        )
        if (result.status !== "completed") {
          return yield* new Skill.SkillError({
            skill: "tldr",
            message: `the agent could not summarize ${path}: ${result.reason ?? result.status}`
          })
        }
        const points = result.text
          .split("\n")
          .filter((line) => line.startsWith("- "))
          .map((line) => line.slice(2).trim())
        yield* Recorder.record({ agent: ctx.agent.name, type: "tldr.summarized", data: { path, points } })
        yield* ctx.output(`TL;DR of ${path}:\n${points.map((p) => `- ${p}`).join("\n")}`)
        return { path, points }
      })
  })

/** The plugin: one factory with one options object. */
export const TldrPlugin = {
  make: (options: Options = {}): Plugin.Plugin =>
    Plugin.make({ name: "tldr", checkpoint: "stateless", skills: [tldr(options)] })
}
