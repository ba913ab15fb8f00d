/**
 * @musekit/core — contracts and machinery of MuseKit, with no Node imports.
 *
 * @example
 * ```ts
 * import { Agent, EventLog, Model, Tools } from "@musekit/core"
 * ```
 */

export * as Agent from "./Agent.js"
export * as Approvals from "./Approvals.js"
export * as Checkpoint from "./Checkpoint.js"
export * as Contract from "./Contract.js"
export * as Crew from "./Crew.js"
export * as Event from "./Event.js"
export * as EventLog from "./EventLog.js"
export * as Model from "./Model.js"
export * as Plugin from "./Plugin.js"
export * as Recorder from "./Recorder.js"
export * as Redactor from "./Redactor.js"
export * as ReportPolicy from "./ReportPolicy.js"
export * as Rewind from "./Rewind.js"
export * as Session from "./Session.js"
export * as Shell from "./Shell.js"
export * as Skill from "./Skill.js"
export * as Stop from "./Stop.js"
export * as Tools from "./Tools.js"
export * as Workspace from "./Workspace.js"
