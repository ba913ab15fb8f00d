/**
 * @musekit/plugin-compaction — token budgeting, observation masking and structured summaries, so
 * agents keep working through runs of thousands of tool calls.
 *
 * @example
 * ```ts
 * import { Plugin } from "@musekit/core"
 * import { CompactionPlugin, Tokens } from "@musekit/plugin-compaction"
 *
 * const plugins = Plugin.layer([CompactionPlugin.make({ contextWindow: 200_000 })])
 * Tokens.countText("hello world") // 2
 * ```
 */

export * as CompactionPlugin from "./CompactionPlugin.js"
export * as Tokens from "./Tokens.js"
