import type { AgentDefinition } from "./index.d.mts";
import type { AgentDefinitionTransform } from "./surface.mjs";

export declare const AGENT_PLUGINS_SCHEMA: "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json";
export declare const AGENT_SKILLS_CONTEXT_ID: "agent.skills";
export declare const AGENT_PLUGIN_COMMANDS_CONTEXT_ID: "agent.plugin-commands";
export type AgentPluginFormat = "agent-plugins-v1" | "open-plugin" | "claude-code" | "cursor";
export type AgentEnvironmentDiagnosticCode =
  | "agent_environment_duplicate_command" | "agent_environment_duplicate_plugin" | "agent_environment_duplicate_skill"
  | "agent_environment_invalid_command" | "agent_environment_invalid_plugin" | "agent_environment_invalid_skill"
  | "agent_environment_unsupported_plugin_agents" | "agent_environment_unsupported_plugin_field"
  | "agent_environment_unsupported_plugin_hooks" | "agent_environment_unsupported_plugin_mcp";
export interface AgentEnvironmentDiagnostic { readonly code: AgentEnvironmentDiagnosticCode; readonly path: string; readonly message: string }
export interface AgentSkill { readonly id: string; readonly name: string; readonly description: string; readonly root: string; readonly file: string; readonly body: string; readonly plugin?: string }
export interface AgentPluginCommand { readonly id: string; readonly name: string; readonly description: string; readonly root: string; readonly file: string; readonly body: string; readonly plugin: string }
export interface AgentPluginManifest {
  readonly $schema?: string; readonly name: string; readonly version?: string; readonly description?: string;
  readonly author?: { readonly name?: string; readonly email?: string; readonly url?: string }; readonly homepage?: string;
  readonly repository?: string; readonly license?: string; readonly keywords?: readonly string[]; readonly extensions?: Readonly<Record<string, unknown>>;
}
export interface AgentPlugin {
  readonly root: string; readonly format: AgentPluginFormat; readonly manifest: AgentPluginManifest; readonly skills: readonly AgentSkill[];
  readonly commands: readonly AgentPluginCommand[]; readonly hasMcp: boolean; readonly hasHooks: boolean; readonly hasAgents: boolean;
}
export interface AgentEnvironment {
  readonly cwd: string; readonly workspaceRoot: string; readonly skills: readonly AgentSkill[]; readonly commands: readonly AgentPluginCommand[];
  readonly plugins: readonly AgentPlugin[]; readonly diagnostics: readonly AgentEnvironmentDiagnostic[];
}
export interface LoadAgentEnvironmentOptions {
  cwd?: string; homeDir?: string; skillRoots?: readonly string[]; pluginRoots?: readonly string[]; pluginCollections?: readonly string[];
  includeDefaultRoots?: boolean; includeWorkspacePlugin?: boolean;
}
export interface ApplyAgentEnvironmentOptions { skillToolName?: string }
export declare function loadAgentEnvironment(options?: LoadAgentEnvironmentOptions): Promise<AgentEnvironment>;
export declare function applyAgentEnvironment<D extends AgentDefinition>(definition: D, environment: AgentEnvironment, options?: ApplyAgentEnvironmentOptions): D;
export declare function createAgentEnvironmentTransform(environment: AgentEnvironment, options?: ApplyAgentEnvironmentOptions): AgentDefinitionTransform;
export declare function expandAgentEnvironmentSlashCommand(prompt: string, environment: AgentEnvironment): string;
export declare function findAgentWorkspaceRoot(cwd: string): Promise<string>;
export declare function loadAgentPlugin(root: string): Promise<{ plugin: AgentPlugin | undefined; diagnostics: readonly AgentEnvironmentDiagnostic[] }>;
export declare function loadAgentSkillDirectory(root: string, options?: { plugin?: string }): Promise<{ skills: readonly AgentSkill[]; diagnostics: readonly AgentEnvironmentDiagnostic[] }>;
export declare function parseAgentSkill(raw: string, options: { file: string; root: string; id?: string; plugin?: string }): AgentSkill;
export declare function readAgentSkillResource(skill: AgentSkill, resource?: string): Promise<string>;
export declare function renderAgentPluginCommandInvocation(environment: AgentEnvironment, id: string, request?: string): string;
export declare function renderAgentPluginCommandsIndex(commands: readonly AgentPluginCommand[]): string;
export declare function renderAgentSkillInvocation(environment: AgentEnvironment, id: string, request?: string): string;
export declare function renderAgentSkillsIndex(skills: readonly AgentSkill[]): string;
