/**
 * @musekit/core — contracts and machinery of MuseKit, with no Node imports.
 *
 * @example
 * ```ts
 * import { Agent, EventLog, Model, Tools } from "@musekit/core"
 * ```
 */
export * as Approvals from "./Approvals.js"
export * as Event from "./Event.js"
export * as EventLog from "./EventLog.js"
export * as Plugin from "./Plugin.js"
export * as Redactor from "./Redactor.js"
export * as Skill from "./Skill.js"
export * as Tools from "./Tools.js"
export * as Workspace from "./Workspace.js"
