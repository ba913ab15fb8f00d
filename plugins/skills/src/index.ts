/**
 * @musekit/plugin-skills — the `/plan`, `/grill` and `/goal` skills for MuseKit, and skills from
 * `SKILL.md` files (the Claude Code / pi format).
 *
 * @example
 * ```ts
 * import { Plugin } from "@musekit/core"
 * import { SkillsPlugin } from "@musekit/plugin-skills"
 *
 * const plugins = Plugin.layer([SkillsPlugin.make({ goal: { maxTurns: 100 } })])
 * ```
 */

export * as Goal from "./Goal.js"
export * as Grill from "./Grill.js"
export * as Plan from "./Plan.js"
export * as Prompts from "./Prompts.js"
export * as SkillFiles from "./SkillFiles.js"
export * as SkillsPlugin from "./SkillsPlugin.js"
