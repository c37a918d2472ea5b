-- Argo CD health check for ohmlab.fr/VaultSeed.
-- Install as resource.customizations.health.ohmlab.fr_VaultSeed in argocd-cm (see the chart's
-- README, "Argo CD"). It reads the conditions the controller sets (kstatus: Ready always,
-- Reconciling or Stalled only when True), and only those of the object's current generation:
--
--   Progressing  being deleted; no status yet; Reconciling=True (RefPending, BackendUnavailable,
--                Forbidden by Vault, ...: the controller retries; ShardChanged: moved to a shard
--                whose process has not reconciled it yet); a generation the controller
--                has not reconciled yet; Ready=False for another reason
--   Degraded     Stalled=True: the controller cannot go on as declared (InvalidSpec, RefCycle,
--                PathDeleted, a Delete that is not allowed, ...) until someone acts; the sync fails
--   Healthy      Ready=True, or Ready=False with reason ObserveOnly (observe-only mode: the
--                object is reconciled, a real run would change the path, nothing is written)
--
-- The message is "<reason>: <the controller's message>" of the condition that decided.
local hs = {}

local generation = obj.metadata.generation
local conditions = {}
if obj.status ~= nil and obj.status.conditions ~= nil then
  conditions = obj.status.conditions
end

-- find returns the condition of that type if it describes the current generation.
local function find(type)
  for _, c in ipairs(conditions) do
    if c.type == type and (c.observedGeneration == nil or generation == nil or c.observedGeneration == generation) then
      return c
    end
  end
  return nil
end

local function describe(c)
  local reason = c.reason or c.type
  if c.message ~= nil and c.message ~= "" then
    return reason .. ": " .. c.message
  end
  return reason
end

local stalled = find("Stalled")
local reconciling = find("Reconciling")
local ready = find("Ready")

if obj.metadata.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  if reconciling ~= nil and reconciling.status == "True" then
    hs.message = "Deleting: " .. describe(reconciling)
  else
    hs.message = "Deleting: waiting for the controller to remove its finalizer"
  end
  return hs
end

if #conditions == 0 then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to reconcile the object"
  return hs
end

if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = describe(stalled)
  return hs
end

if reconciling ~= nil and reconciling.status == "True" then
  hs.status = "Progressing"
  hs.message = describe(reconciling)
  return hs
end

local observed = nil
if obj.status ~= nil then
  observed = obj.status.observedGeneration
end
if generation ~= nil and observed ~= generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to reconcile generation " .. tostring(generation)
  if observed ~= nil then
    hs.message = hs.message .. " (the status describes generation " .. tostring(observed) .. ")"
  end
  return hs
end

if ready ~= nil and (ready.status == "True" or ready.reason == "ObserveOnly") then
  hs.status = "Healthy"
  hs.message = describe(ready)
  return hs
end

hs.status = "Progressing"
if ready ~= nil then
  hs.message = describe(ready)
else
  hs.message = "Waiting for the Ready condition"
end
return hs
