/**
 * @musekit/node — Node layers for MuseKit: the durable file event log, workspace tools, hardened git,
 * and the HTTP client for model servers.
 *
 * @example
 * ```ts
 * import { EventLogFile, HttpClientNode } from "@musekit/node"
 * ```
 */

export * as CodingTools from "./CodingTools.js"
export * as EventLogFile from "./EventLogFile.js"
export * as Git from "./Git.js"
export * as HttpClientNode from "./HttpClientNode.js"
export * as Sandbox from "./Sandbox.js"
export * as SessionRuntime from "./SessionRuntime.js"
export * as ShellParser from "./ShellParser.js"
export * as WorkspaceNode from "./WorkspaceNode.js"
