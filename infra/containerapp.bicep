// sourcegate on Azure Container Apps: the image from a registry, MCP_API_KEY (and the store URL,
// the audit HMAC key) as secrets, an Azure Files share mounted at /data for the audit logs,
// /healthz and /readyz as probes, and an HTTP scale rule.
//
// The index lives in PostgreSQL (SOURCEGATE_STORE, a secret): every replica reads the same library,
// so the app scales between minReplicas and maxReplicas. Each replica appends to its own audit log
// on the share (/data/audit/{hostname}.jsonl), one hash chain per replica.
//
//   az deployment group create -g RG -f infra/containerapp.bicep \
//     -p image=REGISTRY.azurecr.io/sourcegate:0.1.0 registryServer=REGISTRY.azurecr.io \
//        registryUsername=REGISTRY registryPassword=... mcpApiKey=... storeUrl='postgresql://...'
//
// Validated offline only (see docs/deploy.md): parsed with pycep-parser, property names checked
// against the Container Apps API models, scanned with checkov; not deployed to a live subscription here.

@description('Name of the container app (and prefix of the other resources).')
@minLength(2)
@maxLength(24)
param name string = 'sourcegate'

@description('Region of every resource.')
param location string = resourceGroup().location

@description('The image, e.g. myregistry.azurecr.io/sourcegate:0.1.0 (built from the repository Containerfile).')
param image string

@description('Registry host name; empty for a public image.')
param registryServer string = ''

@description('Registry user name (an ACR admin user or a token name).')
param registryUsername string = ''

@description('Registry password.')
@secure()
param registryPassword string = ''

@description('The key agents send in the x-api-key header (Copilot Studio: API key authentication, header x-api-key).')
@secure()
@minLength(24)
param mcpApiKey string

@description('The library: postgresql://USER:PASSWORD@SERVER.postgres.database.azure.com:5432/DB?sslmode=require (pgvector enabled).')
@secure()
param storeUrl string

@description('Keys the audit logs\' hash chains (HMAC-SHA256); empty leaves them unkeyed.')
@secure()
param auditHmacKey string = ''

@description('Entra ID sign-in (docs/entra-id.md): the issuer whose access tokens /mcp and /v1 accept, e.g. https://login.microsoftonline.com/TENANT-ID/v2.0; empty: API keys only.')
param authIssuer string = ''

@description('This server\'s resource URI, the audience of its tokens; empty: https://FQDN/mcp.')
param authResource string = ''

@description('The aud values accepted, comma separated (Entra ID: api://API-CLIENT-ID,API-CLIENT-ID); empty: authResource.')
param authAudience string = ''

@description('The Entra ID tenant (directory) id a token must carry; empty: any tenant of the issuer.')
param authTenantId string = ''

@description('Scopes named in /.well-known/oauth-protected-resource, e.g. api://API-CLIENT-ID/ask.')
param authScopes string = ''

@description('The web page\'s sign-in (docs/entra-id.md#web-page-sign-in): the client id of its app registration, whose Web redirect URI is https://FQDN/auth/callback; empty: the page asks for an API key.')
param authWebClientId string = ''

@description('A client secret of that registration (Entra ID redeems a Web redirect URI\'s code only with one).')
@secure()
param authWebClientSecret string = ''

@description('Seals the sign-in\'s cookies, the same on every replica; the default is new at each deployment (people sign in again after one).')
@secure()
param authWebSessionKey string = '${newGuid()}${newGuid()}'

@description('API keys with the groups each may read (JSON: {"NAME": {"key_sha256": "HEX", "groups": ["GROUP-ID"]}}); empty: none beyond mcpApiKey.')
@secure()
param apiKeys string = ''

@description('vCPUs per replica; SERVE_WORKERS follows it (one worker per whole vCPU).')
@allowed([
  '1.0'
  '2.0'
  '4.0'
])
param cpu string = '2.0'

@description('Replicas kept running (1 keeps the judge warm; 0 lets the app scale to zero).')
@minValue(0)
param minReplicas int = 1

@description('Most replicas the HTTP rule scales out to.')
@minValue(1)
@maxValue(30)
param maxReplicas int = 3

@description('Questions in flight per replica before the HTTP rule adds one.')
param concurrentRequests int = 4

var memory = cpu == '1.0' ? '2Gi' : (cpu == '2.0' ? '4Gi' : '8Gi')
var workers = cpu == '1.0' ? '1' : (cpu == '2.0' ? '2' : '4')
var storageAccountName = toLower(take('${replace(name, '-', '')}${uniqueString(resourceGroup().id)}', 24))
var shareName = 'sourcegate-data'
var fqdn = '${name}.${environment.properties.defaultDomain}'
var registrySecrets = empty(registryServer) ? [] : [
  {
    name: 'registry-password'
    value: registryPassword
  }
]
var hmacSecrets = empty(auditHmacKey) ? [] : [
  {
    name: 'audit-hmac-key'
    value: auditHmacKey
  }
]
var hmacEnv = empty(auditHmacKey) ? [] : [
  {
    name: 'AUDIT_HMAC_KEY'
    secretRef: 'audit-hmac-key'
  }
]
var apiKeySecrets = empty(apiKeys) ? [] : [
  {
    name: 'api-keys'
    value: apiKeys
  }
]
var apiKeyEnv = empty(apiKeys) ? [] : [
  {
    name: 'API_KEYS'
    secretRef: 'api-keys'
  }
]
// Entra ID sign-in: set only with an issuer (an empty AUTH_ISSUER is read as none anyway).
var authEnv = empty(authIssuer) ? [] : [
  {
    name: 'AUTH_ISSUER'
    value: authIssuer
  }
  {
    name: 'AUTH_RESOURCE'
    value: empty(authResource) ? 'https://${fqdn}/mcp' : authResource
  }
  {
    name: 'AUTH_AUDIENCE'
    value: empty(authAudience) ? (empty(authResource) ? 'https://${fqdn}/mcp' : authResource) : authAudience
  }
  {
    name: 'AUTH_TENANT_ID'
    value: authTenantId
  }
  {
    name: 'AUTH_SCOPES'
    value: authScopes
  }
]

// The web page's sign-in: set only with an issuer and the page's client id.
var webSignIn = !empty(authIssuer) && !empty(authWebClientId)
var webSecrets = !webSignIn ? [] : concat([
  {
    name: 'web-session-key'
    value: authWebSessionKey
  }
], empty(authWebClientSecret) ? [] : [
  {
    name: 'web-client-secret'
    value: authWebClientSecret
  }
])
var webEnv = !webSignIn ? [] : concat([
  {
    name: 'AUTH_WEB_CLIENT_ID'
    value: authWebClientId
  }
  {
    name: 'AUTH_WEB_REDIRECT_URI'
    value: 'https://${fqdn}/auth/callback'
  }
  {
    name: 'AUTH_WEB_SESSION_KEY'
    secretRef: 'web-session-key'
  }
], empty(authWebClientSecret) ? [] : [
  {
    name: 'AUTH_WEB_CLIENT_SECRET'
    secretRef: 'web-client-secret'
  }
])

resource logs 'Microsoft.OperationalInsights/workspaces@2022-10-01' = {
  name: '${name}-logs'
  location: location
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: 30
  }
}

resource storage 'Microsoft.Storage/storageAccounts@2023-01-01' = {
  //checkov:skip=CKV_AZURE_35:the Container Apps environment here has no virtual network to allow; reached with the account key over TLS
  //checkov:skip=CKV_AZURE_43:the name is computed (lower case, 24 characters at most, letters and digits), which the check cannot evaluate
  name: storageAccountName
  location: location
  sku: {
    // The audit logs live here: copies in the paired region too.
    name: 'Standard_GRS'
  }
  kind: 'StorageV2'
  properties: {
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    allowBlobPublicAccess: false
  }
}

resource fileService 'Microsoft.Storage/storageAccounts/fileServices@2023-01-01' = {
  parent: storage
  name: 'default'
}

resource share 'Microsoft.Storage/storageAccounts/fileServices/shares@2023-01-01' = {
  parent: fileService
  name: shareName
  properties: {
    shareQuota: 100
  }
}

resource environment 'Microsoft.App/managedEnvironments@2024-03-01' = {
  name: '${name}-env'
  location: location
  properties: {
    appLogsConfiguration: {
      destination: 'log-analytics'
      logAnalyticsConfiguration: {
        customerId: logs.properties.customerId
        sharedKey: logs.listKeys().primarySharedKey
      }
    }
  }
}

resource environmentStorage 'Microsoft.App/managedEnvironments/storages@2024-03-01' = {
  parent: environment
  name: 'sourcegate-data'
  properties: {
    azureFile: {
      accountName: storage.name
      accountKey: storage.listKeys().keys[0].value
      shareName: share.name
      accessMode: 'ReadWrite'
    }
  }
}

resource app 'Microsoft.App/containerApps@2024-03-01' = {
  name: name
  location: location
  properties: {
    managedEnvironmentId: environment.id
    configuration: {
      activeRevisionsMode: 'Single'
      ingress: {
        external: true
        targetPort: 8000
        transport: 'auto'
        allowInsecure: false
      }
      secrets: concat([
        {
          name: 'mcp-api-key'
          value: mcpApiKey
        }
        {
          name: 'store-url'
          value: storeUrl
        }
      ], registrySecrets, hmacSecrets, apiKeySecrets, webSecrets)
      registries: empty(registryServer) ? [] : [
        {
          server: registryServer
          username: registryUsername
          passwordSecretRef: 'registry-password'
        }
      ]
    }
    template: {
      // SIGTERM, then the questions in flight are finished and audited (SERVE_SHUTDOWN_TIMEOUT_S) before the kill.
      terminationGracePeriodSeconds: 45
      containers: [
        {
          name: 'sourcegate'
          image: image
          resources: {
            cpu: json(cpu)
            memory: memory
          }
          env: concat([
            {
              name: 'MCP_API_KEY'
              secretRef: 'mcp-api-key'
            }
            {
              name: 'SOURCEGATE_STORE'
              secretRef: 'store-url'
            }
            {
              name: 'ALLOWED_HOSTS'
              value: fqdn
            }
            {
              name: 'SERVE_WORKERS'
              value: workers
            }
            {
              name: 'SERVE_SHUTDOWN_TIMEOUT_S'
              value: '30'
            }
            {
              name: 'AUDIT_LOG_PATH'
              value: '/data/audit/{hostname}.jsonl'
            }
          ], hmacEnv, apiKeyEnv, authEnv, webEnv)
          volumeMounts: [
            {
              volumeName: 'data'
              mountPath: '/data'
            }
          ]
          probes: [
            {
              type: 'Startup'
              httpGet: {
                path: '/healthz'
                port: 8000
              }
              periodSeconds: 5
              failureThreshold: 24
            }
            {
              type: 'Liveness'
              httpGet: {
                path: '/healthz'
                port: 8000
              }
              periodSeconds: 15
              failureThreshold: 3
            }
            {
              type: 'Readiness'
              httpGet: {
                path: '/readyz'
                port: 8000
              }
              periodSeconds: 5
              failureThreshold: 2
            }
          ]
        }
      ]
      scale: {
        minReplicas: minReplicas
        maxReplicas: maxReplicas
        rules: [
          {
            name: 'http-load'
            http: {
              metadata: {
                concurrentRequests: string(concurrentRequests)
              }
            }
          }
        ]
      }
      volumes: [
        {
          name: 'data'
          storageType: 'AzureFile'
          storageName: environmentStorage.name
        }
      ]
    }
  }
}

@description('The MCP server URL for Copilot Studio.')
output mcpUrl string = 'https://${app.properties.configuration.ingress.fqdn}/mcp'

@description('The host name the connector (sourcegate connector --host) and ALLOWED_HOSTS use.')
output hostName string = app.properties.configuration.ingress.fqdn
